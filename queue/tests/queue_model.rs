//! Model-based property test: the DeliQueue against a
//! `BTreeMap<(when, seq), id>` under random pushes, front pushes, cancels,
//! removals by tag, and pops at random times.

use std::collections::BTreeMap;

use deliloop_queue::{DeliQueue, Push, Ticket};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Push { when: u64, tag: u8 },
    Front,
    Cancel(usize),
    RemoveTag(u8),
    Pop { now: u64 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u64..50, 0u8..4).prop_map(|(when, tag)| Op::Push { when, tag }),
        1 => Just(Op::Front),
        2 => any::<usize>().prop_map(Op::Cancel),
        1 => (0u8..4).prop_map(Op::RemoveTag),
        3 => (0u64..60).prop_map(|now| Op::Pop { now }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: if cfg!(miri) { 4 } else { 256 },
        // Miri's isolation forbids the file system that persistence uses.
        failure_persistence: if cfg!(miri) { None } else { ProptestConfig::default().failure_persistence },
        ..ProptestConfig::default()
    })]

    #[test]
    fn matches_an_ordered_map(ops in proptest::collection::vec(op(), 1..200)) {
        let mut q = DeliQueue::new();
        let p = q.producer();
        // model key: (when, rank) where rank orders front pushes (negative,
        // newest first) and the rest (positive, oldest first).
        let mut model: BTreeMap<(u64, i64), (usize, u8)> = BTreeMap::new();
        let mut tickets: Vec<(Ticket<usize>, (u64, i64))> = Vec::new();
        let (mut up, mut down) = (0i64, 0i64);
        let mut next_id = 0usize;
        for op in ops {
            match op {
                Op::Push { when, tag } => {
                    up += 1;
                    let (t, _) = p.push_cancellable(next_id, Push::at(when).tag(tag as u64)).unwrap();
                    model.insert((when, up), (next_id, tag));
                    tickets.push((t, (when, up)));
                    next_id += 1;
                }
                Op::Front => {
                    down -= 1;
                    let (t, _) = p.push_cancellable(next_id, Push::front().tag(9)).unwrap();
                    model.insert((0, down), (next_id, 9));
                    tickets.push((t, (0, down)));
                    next_id += 1;
                }
                Op::Cancel(i) => {
                    if !tickets.is_empty() {
                        let (t, key) = &tickets[i % tickets.len()];
                        let expected = model.remove(key).is_some();
                        prop_assert_eq!(t.cancel(), expected);
                    }
                }
                Op::RemoveTag(tag) => {
                    let before = model.len();
                    model.retain(|_, (_, t)| *t != tag);
                    prop_assert_eq!(p.remove_where(|i| i.tag() == Some(tag as u64)), before - model.len());
                }
                Op::Pop { now } => {
                    let expected = model.iter().next().filter(|(k, _)| k.0 <= now).map(|(k, v)| (*k, v.0));
                    let got = q.pop_due(now).map(|e| e.item);
                    if let Some((k, _)) = expected {
                        model.remove(&k);
                    }
                    prop_assert_eq!(got, expected.map(|(_, id)| id));
                }
            }
            prop_assert_eq!(q.len(), model.len());
            prop_assert_eq!(q.next_deadline(), model.keys().next().map(|k| k.0));
        }
        let drained: Vec<usize> = q.drain().into_iter().map(|e| e.item).collect();
        let expected: Vec<usize> = model.values().map(|v| v.0).collect();
        prop_assert_eq!(drained, expected);
    }
}
