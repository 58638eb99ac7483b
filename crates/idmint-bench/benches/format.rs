//! Text encoding and parsing of one ID: idmint's formats beside `ulid` and `uuid`.
//!
//! "to_string" rows allocate a new `String` per ID, as `Display` users do; "write" rows append
//! to one reused buffer, as a server writing many IDs does.

use std::{hint::black_box, time::Duration};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use idmint_core::{Format, HotGuid, Snowflake};

fn format(c: &mut Criterion) {
    let mut group = c.benchmark_group("format");
    group
        .throughput(Throughput::Elements(1))
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .sample_size(50);

    let id = Snowflake::EXAMPLE;
    let raw = id.to_raw();
    group.bench_function("idmint/snowflake decimal to_string", |b| b.iter(|| id.to_string()));
    let mut out = String::with_capacity(64);
    for (name, format) in [("decimal", Format::Decimal), ("base32", Format::Base32)] {
        group.bench_function(format!("idmint/snowflake {name} write"), |b| {
            b.iter(|| {
                out.clear();
                format.write_u64(black_box(raw), &mut out).expect("encodable");
                black_box(&out);
            })
        });
        let text = format.encode_u64(raw).expect("encodable");
        group.bench_function(format!("idmint/snowflake {name} parse"), |b| {
            b.iter(|| format.parse_u64(black_box(&text)).expect("valid"))
        });
    }

    let guid = HotGuid::from(0x61ff_0f80_981e_12e9_3400_0000_d000_0000_u128);
    group.bench_function("idmint/hot-guid to_string (36-char uuid form)", |b| {
        b.iter(|| black_box(guid).to_string())
    });
    let text = guid.to_string();
    group.bench_function("idmint/hot-guid parse", |b| {
        b.iter(|| black_box(&text).parse::<HotGuid>().expect("valid"))
    });

    let ulid = ulid::Ulid::generate();
    group.bench_function("ulid/to_string (26-char base32)", |b| {
        b.iter(|| black_box(ulid).to_string())
    });
    let text = ulid.to_string();
    group.bench_function("ulid/from_string", |b| {
        b.iter(|| ulid::Ulid::from_string(black_box(&text)).expect("valid"))
    });

    let uuid = uuid::Uuid::now_v7();
    group.bench_function("uuid/to_string (36-char hyphenated)", |b| {
        b.iter(|| black_box(uuid).to_string())
    });
    let text = uuid.to_string();
    group.bench_function("uuid/parse_str", |b| {
        b.iter(|| uuid::Uuid::parse_str(black_box(&text)).expect("valid"))
    });
    group.finish();
}

criterion_group!(
    name = benches;
    config = Criterion::default().without_plots();
    targets = format
);
criterion_main!(benches);
