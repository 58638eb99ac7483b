//! `idmint decode --layout auto` through the real binary: IDs made by the peer crates (uuid,
//! ulid, xid, scru128, tsid, svix-ksuid, bson's ObjectId) and by idmint's own layouts, and the
//! examples of each format's specification, all through one `check` helper.

use std::{
    io::Write,
    process::{Command, Stdio},
    time::{SystemTime, UNIX_EPOCH},
};

use idmint_core::format_rfc3339_ms;
use proptest::prelude::*;
use serde_json::Value;
use svix_ksuid::KsuidLike;

/// The binary under test.
use crate::common::IDMINT;

/// Where the expected format must stand among the candidates.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Rank {
    /// The best candidate (`layout` of the JSON object).
    Best,
    /// One of the candidates (a bare integer fits many layouts).
    Listed,
}

/// One ID and what `decode --layout auto --json` must say of it.
#[derive(Debug, Clone)]
struct Case {
    id: String,
    layout: String,
    /// The expected time as RFC 3339, or a prefix of it (to the peer's precision); `None`
    /// for formats without time.
    time: Option<String>,
    rank: Rank,
    /// Fields the candidate must have, with these values (numbers, or hex text above 64 bits).
    fields: Vec<(&'static str, Value)>,
}

impl Case {
    /// The same case, also checking a field's value.
    fn with(mut self, name: &'static str, value: impl Into<Value>) -> Self {
        self.fields.push((name, value.into()));
        self
    }
}

fn case(id: impl Into<String>, layout: &str, time: Option<&str>, rank: Rank) -> Case {
    Case {
        id: id.into(),
        layout: layout.to_owned(),
        time: time.map(str::to_owned),
        rank,
        fields: Vec::new(),
    }
}

/// Unix ms as the CLI prints them.
fn at(ms: u64) -> Option<String> {
    Some(format_rfc3339_ms(ms))
}

/// `SystemTime` to Unix ms.
fn ms_of(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH).expect("after 1970").as_millis() as u64
}

/// Runs `idmint decode --layout auto --json` once on every case's ID (as arguments, or on
/// stdin), and checks each answer.
fn check(cases: &[Case], via_stdin: bool) {
    let mut command = Command::new(IDMINT);
    command.args(["decode", "--layout", "auto", "--json"]);
    if via_stdin {
        command.stdin(Stdio::piped());
    } else {
        command.args(cases.iter().map(|c| c.id.as_str()));
    }
    let mut child =
        command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("run idmint");
    if via_stdin {
        let mut stdin = child.stdin.take().expect("stdin");
        for c in cases {
            writeln!(stdin, "{}", c.id).expect("write stdin");
        }
    }
    let out = child.wait_with_output().expect("idmint ends");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "idmint failed: {stderr}");
    assert!(stderr.is_empty(), "stderr: {stderr}");
    let lines: Vec<Value> = String::from_utf8(out.stdout)
        .expect("utf-8")
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect();
    assert_eq!(lines.len(), cases.len(), "one JSON object per ID");
    for (case, got) in cases.iter().zip(&lines) {
        let candidates = got["candidates"].as_array().expect("candidates");
        assert_eq!(
            got["layout"], candidates[0]["layout"],
            "{}: layout is the best candidate",
            case.id
        );
        assert_eq!(got["time"], candidates[0]["time"], "{}", case.id);
        let scores: Vec<u64> =
            candidates.iter().map(|c| c["score"].as_u64().expect("score")).collect();
        assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{}: not best first: {scores:?}", case.id);
        let found = candidates
            .iter()
            .find(|c| c["layout"] == case.layout.as_str())
            .unwrap_or_else(|| panic!("{}: no {} candidate in {got}", case.id, case.layout));
        if case.rank == Rank::Best {
            assert_eq!(got["layout"], case.layout.as_str(), "{}: {got}", case.id);
        }
        match &case.time {
            None => assert_eq!(found["time"], Value::Null, "{}", case.id),
            Some(time) => {
                let shown =
                    found["time"].as_str().unwrap_or_else(|| panic!("{}: no time", case.id));
                assert!(
                    shown.starts_with(time.as_str()),
                    "{}: time {shown}, expected {time}",
                    case.id
                );
            }
        }
        assert!(found["fields"].as_object().is_some_and(|f| !f.is_empty()), "{}", case.id);
        for (name, value) in &case.fields {
            assert_eq!(&found["fields"][name], value, "{}: field {name}", case.id);
        }
    }
}

/// The examples of each format's own specification or documentation.
#[test]
fn specification_examples() {
    use Rank::{Best, Listed};
    let cases = [
        // RFC 9562, appendix A: v1, v6 and v7 all encode 2022-02-22T19:22:22Z (v1 and v6 at
        // 100 ns, shown to the ms); v3, v4, v5 and v8 (appendix B) have no time.
        case(
            "C232AB00-9414-11EC-B3C8-9F6BDECED846",
            "uuid-v1",
            Some("2022-02-22T19:22:22.000Z"),
            Best,
        ),
        case(
            "1EC9414C-232A-6B00-B3C8-9F6BDECED846",
            "uuid-v6",
            Some("2022-02-22T19:22:22.000Z"),
            Best,
        ),
        case(
            "017F22E2-79B0-7CC3-98C4-DC0C0C07398F",
            "uuid-v7",
            Some("2022-02-22T19:22:22.000Z"),
            Best,
        ),
        case("5df41881-3aed-3515-88a7-2f4a814cf09e", "uuid-v3", None, Best),
        case("919108f7-52d1-4320-9bac-f847db4148a8", "uuid-v4", None, Best),
        case("2ed6657d-e927-568b-95e1-2665a8aea6a2", "uuid-v5", None, Best),
        case("2489e9ad-2ee2-8e00-8ec9-32d5f69181c0", "uuid-v8", None, Best),
        case("00000000-0000-0000-0000-000000000000", "uuid-nil", None, Best),
        case("FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF", "uuid-max", None, Best),
        // The same v7 UUID as 32 hex digits, in braces and as a URN.
        case("017F22E279B07CC398C4DC0C0C07398F", "uuid-v7", Some("2022-02-22T19:22:22.000Z"), Best),
        case("{017f22e2-79b0-7cc3-98c4-dc0c0c07398f}", "uuid-v7", Some("2022-02-22"), Best),
        case("urn:uuid:017f22e2-79b0-7cc3-98c4-dc0c0c07398f", "uuid-v7", Some("2022-02-22"), Best),
        // The ULID README's example.
        case("01ARZ3NDEKTSV4RRFFQ69G5FAV", "ulid", Some("2016-07-30T23:54:10.259Z"), Best),
        // The KSUID README: "Time: 2017-10-09 21:00:47 -0700 PDT".
        case("0ujtsYcgvSTl8PAuAdqWYSMnLOv", "ksuid", Some("2017-10-10T04:00:47.000Z"), Best)
            .with("timestamp", 107_608_047)
            .with("payload", "b5a1cd34b5f99d1154fb6853345c9735"),
        // MongoDB's manual: ObjectId("507f191e810c19729de860ea").getTimestamp() is
        // ISODate("2012-10-17T20:46:22Z").
        case("507f191e810c19729de860ea", "objectid", Some("2012-10-17T20:46:22.000Z"), Best),
        // Discord's API reference: 175928847299117063 is 2016-04-30 11:18:25.796 UTC, worker 1,
        // process 0, increment 7.
        case("175928847299117063", "discord", Some("2016-04-30T11:18:25.796Z"), Listed)
            .with("worker", 1)
            .with("process", 0)
            .with("increment", 7),
        // Twitter's Tweet object example: id 1050118621198921728, "created_at": "Wed Oct 10
        // 20:19:24 +0000 2018" (seconds only). Twitter's layout is idmint's `snowflake`.
        case("1050118621198921728", "snowflake", Some("2018-10-10T20:19:24"), Listed),
        // Mastodon's Status entity example: "id": "103270115826048975", "created_at":
        // "2019-12-08T03:48:33.901Z"; the ID's own ms are 33.849 (the server sets created_at
        // separately), so the second is compared.
        case("103270115826048975", "mastodon", Some("2019-12-08T03:48:33"), Listed),
        // Instagram's engineering blog: 1387263000 ms after its epoch (the SQL function's
        // 1314220021721), shard 31341 % 2000 = 1341, sequence 5001 % 1024 = 905.
        case(
            ((1_387_263_000u64 << 23) | (1341 << 10) | 905).to_string(),
            "instagram",
            Some("2011-09-09T22:28:04.721Z"),
            Listed,
        )
        .with("shard", 1341)
        .with("sequence", 905),
    ];
    check(&cases, false);
    // The same IDs on stdin.
    check(&cases, true);
}

/// The examples of the xid, SCRU128 and TSID READMEs, whose times the READMEs do not print:
/// the time expected is the peer crate's own reading.
#[test]
fn readme_examples_agree_with_the_peer_crates() {
    let xid_text = "9m4e2mr0ui3e8a215n4g";
    let xid: xid::Id = xid_text.parse().expect("xid parses");
    let scru = "036z951mhjikzik2gsl81gr7l";
    let scru_id: scru128::Id = scru.parse().expect("scru128 parses");
    let tsid_text = "0AWE5HZP3SKTK";
    let tsid = tsid::TSID::try_from(tsid_text).expect("tsid parses");
    check(
        &[
            case(xid_text, "xid", at(ms_of(xid.time())).as_deref(), Rank::Best),
            case(scru, "scru128", at(scru_id.timestamp()).as_deref(), Rank::Best),
            case(
                tsid_text,
                "tsid",
                at(tsid.timestamp().timestamp_millis() as u64).as_deref(),
                Rank::Best,
            ),
            case(
                tsid.number().to_string(),
                "tsid-number",
                at(tsid.timestamp().timestamp_millis() as u64).as_deref(),
                Rank::Listed,
            ),
        ],
        false,
    );
}

/// IDs made now by each peer crate: named as their format (best candidate), at the time the
/// crate reports.
#[test]
fn ids_of_the_peer_crates_now() {
    let mut cases = Vec::new();
    for _ in 0..3 {
        let v4 = uuid::Uuid::new_v4();
        cases.push(case(v4.to_string(), "uuid-v4", None, Rank::Best));
        let v7 = uuid::Uuid::now_v7();
        cases.push(case(v7.to_string(), "uuid-v7", uuid_time(&v7).as_deref(), Rank::Best));
        let v1 = uuid::Uuid::now_v1(&[1, 2, 3, 4, 5, 6]);
        cases.push(case(v1.to_string(), "uuid-v1", uuid_time(&v1).as_deref(), Rank::Best));
        let v6 = uuid::Uuid::now_v6(&[1, 2, 3, 4, 5, 6]);
        cases.push(case(v6.simple().to_string(), "uuid-v6", uuid_time(&v6).as_deref(), Rank::Best));
        let v8 = uuid::Uuid::new_v8(*v4.as_bytes());
        cases.push(case(v8.braced().to_string(), "uuid-v8", None, Rank::Best));
        let v3 = uuid::Builder::from_md5_bytes(*v4.as_bytes()).into_uuid();
        cases.push(case(v3.urn().to_string(), "uuid-v3", None, Rank::Best));
        let v5 = uuid::Builder::from_sha1_bytes(*v4.as_bytes()).into_uuid();
        cases.push(case(v5.to_string(), "uuid-v5", None, Rank::Best));
        let ulid = ulid::Ulid::from_parts(ms_of(SystemTime::now()), v4.as_u128());
        cases.push(case(ulid.to_string(), "ulid", at(ulid.timestamp_ms()).as_deref(), Rank::Best));
        let xid = xid::new();
        cases.push(case(xid.to_string(), "xid", at(ms_of(xid.time())).as_deref(), Rank::Best));
        let scru = scru128::new();
        cases.push(case(scru.to_string(), "scru128", at(scru.timestamp()).as_deref(), Rank::Best));
        let tsid = tsid::create_tsid();
        let tsid_ms = tsid.timestamp().timestamp_millis() as u64;
        cases.push(case(tsid.to_string(), "tsid", at(tsid_ms).as_deref(), Rank::Best));
        cases.push(case(
            tsid.number().to_string(),
            "tsid-number",
            at(tsid_ms).as_deref(),
            Rank::Listed,
        ));
        let ksuid = svix_ksuid::Ksuid::new(None::<SystemTime>, None);
        let ksuid_ms = ksuid.timestamp_seconds() as u64 * 1000;
        cases.push(case(ksuid.to_string(), "ksuid", at(ksuid_ms).as_deref(), Rank::Best));
        let oid = bson::oid::ObjectId::new();
        let oid_ms = oid.timestamp().timestamp_millis() as u64;
        cases.push(case(oid.to_hex(), "objectid", at(oid_ms).as_deref(), Rank::Best));
    }
    check(&cases, false);
}

/// A UUID's time as the uuid crate reads it, to the ms.
fn uuid_time(uuid: &uuid::Uuid) -> Option<String> {
    let (secs, nanos) = uuid.get_timestamp()?.to_unix();
    at(secs * 1000 + u64::from(nanos) / 1_000_000)
}

/// IDs of every idmint built-in layout, made by `idmint gen`: `--layout auto` lists the layout
/// with the time `--layout L` shows.
#[test]
fn every_builtin_layout_is_a_candidate() {
    let layouts = Command::new(IDMINT).arg("layouts").output().expect("idmint layouts");
    let names: Vec<String> = String::from_utf8(layouts.stdout)
        .expect("utf-8")
        .lines()
        .filter_map(|line| line.split_whitespace().next().map(str::to_owned))
        .collect();
    assert!(names.len() >= 11, "{names:?}");
    let mut cases = Vec::new();
    for name in &names {
        // A layout without time needs a launch named (`gen` refuses one that would repeat).
        let launch: &[&str] = if name == "decimal-id" { &["launch_id=1"] } else { &[] };
        let made = Command::new(IDMINT)
            .args(["gen", "--layout", name, "--json"])
            .args(launch)
            .output()
            .expect("gen");
        if !made.status.success() {
            // `sequence` IDs come from a store, not a generator: take one by hand.
            assert_eq!(
                name,
                "sequence",
                "gen --layout {name}: {}",
                String::from_utf8_lossy(&made.stderr)
            );
            cases.push(case("42", "sequence", None, Rank::Listed));
            continue;
        }
        let generated: Value = serde_json::from_slice(&made.stdout).expect("gen --json");
        let id = generated["id"].as_str().expect("id").to_owned();
        let time = generated["time"].as_str().map(str::to_owned);
        cases.push(Case { id, layout: name.clone(), time, rank: Rank::Listed, fields: Vec::new() });
    }
    check(&cases, false);
}

/// What matches nothing is refused: one `error:` line naming what was tried, a non-zero exit,
/// no panic. `--format` and `--epoch` do not apply to `auto`.
#[test]
fn unrecognised_ids_are_refused() {
    let check_refused = |args: &[&str], says: &str| {
        let out = Command::new(IDMINT).args(args).output().expect("run idmint");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}");
        assert!(stderr.starts_with("error: ") && stderr.contains(says), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
    };
    check_refused(&["decode", "--layout", "auto", "not-an-id"], "tried: uuid-nil");
    // `0x1f` is go-flakeid's `0x%x` form now; a 0x that no hex follows is nothing.
    check_refused(&["decode", "--layout", "auto", "0x1g"], "ksuid");
    check_refused(
        &["decode", "--layout", "auto", "0123456789abcdefghij0123456789abcdef"],
        "not an ID",
    );
    check_refused(&["decode", "--layout", "auto", "\u{e9}\u{e9}"], "not an ID");
    // ULID's first character is at most 7 (128 bits); an xid's last one has its low bits zero.
    check_refused(&["decode", "--layout", "auto", "81ARZ3NDEKTSV4RRFFQ69G5FAV"], "ulid");
    check_refused(&["decode", "--layout", "auto", "9m4e2mr0ui3e8a215n4h"], "xid");
    check_refused(&["decode", "--layout", "auto", "--format", "hex", "1"], "--format");
    check_refused(&["decode", "--layout", "auto", "--epoch", "0", "1"], "--epoch");
}

/// The table form: the best candidate's rows, then the others one line each.
#[test]
fn table_shows_the_best_then_the_others() {
    let out = Command::new(IDMINT)
        .args([
            "decode",
            "--layout",
            "auto",
            "507f191e810c19729de860ea",
            "01ARZ3NDEKTSV4RRFFQ69G5FAV",
        ])
        .output()
        .expect("run idmint");
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).expect("utf-8");
    let first: Vec<&str> = text.split("\n\n").next().expect("a table").lines().collect();
    assert!(first[0].starts_with("layout") && first[0].ends_with("objectid"), "{text}");
    assert!(
        first.iter().any(|l| l.starts_with("time") && l.ends_with("2012-10-17T20:46:22.000Z")),
        "{text}"
    );
    assert!(first.iter().any(|l| l.starts_with("counter") && l.ends_with("(24 bits)")), "{text}");
    assert_eq!(first[first.len() - 2], "other candidates, best first:", "{text}");
    assert!(first[first.len() - 1].trim_start().starts_with("xid-hex"), "{text}");
    let second = text.split("\n\n").nth(1).expect("a second table");
    assert!(
        second.starts_with("layout ") && second.lines().next().unwrap().ends_with(" ulid"),
        "{text}"
    );
    assert!(!second.contains("other candidates"), "{text}");
}

/// ULID, UUID v7 and KSUID made by their crates at any time in the plausible window decode to
/// that time (to the crate's precision), as the best candidate.
fn plausible_ms() -> impl Strategy<Value = u64> {
    // 2000-01-01 .. 2025-01-01: well inside [2000-01-01, now + 1 day].
    946_684_800_000u64..1_735_689_600_000
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    #[test]
    fn peer_ids_at_any_time_round_trip(
        times in prop::collection::vec((plausible_ms(), any::<[u8; 16]>()), 1..12),
    ) {
        let mut cases = Vec::new();
        for (ms, random) in times {
            let ulid = ulid::Ulid::from_parts(ms, u128::from_be_bytes(random));
            cases.push(case(ulid.to_string(), "ulid", at(ms).as_deref(), Rank::Best));
            let ts = uuid::Timestamp::from_unix(uuid::NoContext, ms / 1000, (ms % 1000) as u32 * 1_000_000);
            let v7 = uuid::Builder::from_unix_timestamp_millis(ms, &random[..10].try_into().unwrap()).into_uuid();
            cases.push(case(v7.to_string(), "uuid-v7", at(ms).as_deref(), Rank::Best));
            let v1 = uuid::Uuid::new_v1(ts, &[random[0], 2, 3, 4, 5, 6]);
            cases.push(case(v1.to_string(), "uuid-v1", at(ms).as_deref(), Rank::Best));
            let v6 = uuid::Uuid::new_v6(ts, &[random[1], 2, 3, 4, 5, 6]);
            cases.push(case(v6.to_string(), "uuid-v6", at(ms).as_deref(), Rank::Best));
            let secs = ms / 1000;
            if secs >= 1_400_000_000 {
                let ksuid = svix_ksuid::Ksuid::new_raw((secs - 1_400_000_000) as u32, Some(&random));
                cases.push(case(ksuid.to_string(), "ksuid", at(secs * 1000).as_deref(), Rank::Best));
            }
            let scru = scru128::Id::try_from_fields(ms, 1, 2, u32::from_be_bytes(random[..4].try_into().unwrap())).unwrap();
            cases.push(case(scru.to_string(), "scru128", at(ms).as_deref(), Rank::Best));
        }
        check(&cases, false);
    }
}
