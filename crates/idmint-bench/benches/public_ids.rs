//! The cost of a public ID beside the ID itself, in one run: a typed snowflake `next()`, then
//! FF1 (AES-256) and multiplicative `obfuscate` and `reveal` of one snowflake ID.

use std::{hint::black_box, time::Duration};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use idmint_core::{
    AnyId, GeneratorConfig, Layout, Next, PublicIdKey, PublicIdKeys, PublicIdMethod, PublicIds,
    Snowflake,
};

fn keys(method: PublicIdMethod) -> PublicIdKeys {
    let secret = match method {
        PublicIdMethod::Ff1 => vec![0x5a; 32],
        PublicIdMethod::Multiply => vec![0x9d; 16],
    };
    PublicIdKeys {
        method,
        version_bits: 0,
        active: 0,
        keys: vec![PublicIdKey { version: 0, secret }],
    }
}

fn public_ids(c: &mut Criterion) {
    let mut group = c.benchmark_group("public_ids");
    group
        .throughput(Throughput::Elements(1))
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2))
        .sample_size(50);
    let generator = Snowflake::generator(1, 7, &GeneratorConfig::default()).expect("generator");
    let mut now = Snowflake::EPOCH_MS + 1;
    group.bench_function("idmint/snowflake next (typed)", |b| {
        b.iter(|| match generator.next(black_box(now)).expect("next") {
            Next::Ready(id) => id,
            Next::Wait { until_ms } => {
                now = until_ms;
                generator.next(now).expect("next").ready().expect("after the wait")
            }
        })
    });
    let layout = Layout::builtin("snowflake").expect("snowflake");
    let id = AnyId::U64(Snowflake::EXAMPLE.to_raw());
    for method in [PublicIdMethod::Ff1, PublicIdMethod::Multiply] {
        let ids = PublicIds::new(&layout, &keys(method)).expect("public ids");
        let public = ids.obfuscate(id).expect("obfuscate");
        group.bench_function(format!("idmint/{} obfuscate", method.name()), |b| {
            b.iter(|| ids.obfuscate(black_box(id)).expect("obfuscate"))
        });
        group.bench_function(format!("idmint/{} reveal", method.name()), |b| {
            b.iter(|| ids.reveal(black_box(public)).expect("reveal"))
        });
    }
    group.finish();
}

criterion_group!(benches, public_ids);
criterion_main!(benches);
