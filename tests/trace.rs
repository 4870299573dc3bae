//! The trace a run writes (feature `trace`) is Chrome trace-event JSON
//! that Perfetto opens: every event has `ph`, `ts`, `pid`, `tid`; slices
//! have `dur`; `ts` never goes back on a track; flows pair up.
#![cfg(feature = "trace")]

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use deliloop::{Looper, Tag};

#[test]
#[cfg_attr(miri, ignore = "writes a trace file; Miri isolates the file system")]
fn a_trace_of_posts_timers_and_tasks_meets_the_trace_event_format() {
    let path = std::env::temp_dir().join(format!("deliloop-trace-{}.json", std::process::id()));
    let looper = Looper::new().unwrap();
    let h = looper.handle();
    let guard = looper.start_trace(&path).unwrap();
    let poster = {
        let h = h.clone();
        std::thread::spawn(move || {
            for i in 0..200 {
                h.message(|| {}).tag(Tag(i % 3)).post().unwrap();
            }
        })
    };
    looper.block_on(async {
        for _ in 0..5 {
            deliloop::time::sleep(Duration::from_millis(1)).await;
            deliloop::spawn(async {}).await;
        }
    });
    poster.join().unwrap();
    while looper.dispatch_ready().dispatched > 0 {}
    guard.finish().unwrap();

    let text = std::fs::read_to_string(&path).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    let events = json["traceEvents"].as_array().expect("traceEvents");
    assert!(events.len() > 200, "{} events", events.len());
    let mut last_ts: HashMap<(u64, u64), f64> = HashMap::new();
    let (mut starts, mut ends) = (HashSet::new(), HashSet::new());
    let mut kinds = HashSet::new();
    for e in events {
        let ph = e["ph"].as_str().expect("ph");
        let ts = e["ts"].as_f64().expect("ts");
        let pid = e["pid"].as_u64().expect("pid");
        let tid = e["tid"].as_u64().expect("tid");
        kinds.insert(ph.to_string());
        if ph == "X" {
            assert!(e["dur"].as_f64().expect("a slice has dur") >= 0.0);
        }
        let last = last_ts.entry((pid, tid)).or_insert(ts);
        assert!(ts >= *last, "ts went back on track {tid}: {ts} < {last}");
        *last = ts;
        match ph {
            "s" => assert!(starts.insert(e["id"].as_u64().unwrap())),
            "f" => assert!(ends.insert(e["id"].as_u64().unwrap())),
            _ => {}
        }
    }
    assert_eq!(starts, ends, "every flow has a start and an end");
    assert_eq!(starts.len(), 200, "one flow per cross-thread post");
    for k in ["X", "C", "s", "f", "i"] {
        assert!(kinds.contains(k), "no {k:?} event in {kinds:?}");
    }
    let _ = std::fs::remove_file(&path);
}
