//! The orchestrator's view of each mission's life: every event must be one
//! the contract's state diagram allows from what was seen before. Written
//! out here on its own (not warden's `MissionState`), so the peer checks
//! warden rather than agreeing with it.
//!
//! Delivery is at least once: a frame identical to one already received is
//! a resend, not a new event, and is not judged again.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    Assigned,
    Running,
    WaitingForHuman,
    Suspended,
    Ended,
}

#[derive(Debug, Default)]
struct Mission {
    state: Option<Seen>,
    progressed: bool,
    /// The checkpoint of the last `mission.suspended`.
    checkpoint: Option<String>,
    /// `mission.reconnected` came since the last suspension.
    reconnected: bool,
}

/// Follows every mission of one executor across connections.
#[derive(Debug, Default)]
pub struct Tracker {
    /// By executor and mission id.
    missions: HashMap<(String, String), Mission>,
    /// Every frame received, with the last connection it came on.
    frames: HashMap<String, u32>,
    /// Missions the last `executor.resync` owned.
    owned: HashSet<String>,
}

impl Tracker {
    /// Judges one frame received on `connection`; the violations it shows.
    /// A frame identical to one of an earlier connection is a resend (a
    /// connection lost before its acknowledgement); on the same connection
    /// it is a duplicate, and judged.
    pub fn observe(&mut self, connection: u32, frame: &Value) -> Vec<String> {
        match self.frames.insert(frame.to_string(), connection) {
            Some(earlier) if earlier < connection => return Vec::new(),
            _ => {}
        }
        let event = frame["event"].as_str().unwrap_or_default();
        if event == "executor.resync" {
            self.owned = frame["data"]["owned_mission_ids"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect();
            return Vec::new();
        }
        let Some(id) = frame["mission_id"].as_str() else {
            return Vec::new();
        };
        let owned = self.owned.contains(id);
        let executor = frame["executor_id"].as_str().unwrap_or_default().to_owned();
        let m = self.missions.entry((executor, id.to_owned())).or_default();
        let mut out = Vec::new();
        let mut bad = |why: String| out.push(format!("mission {id}: {event} {why}"));
        use Seen::*;
        let from = m.state;
        let to = match (event, from) {
            // A mission this peer never saw assigned, owned by a resync (a
            // peer that started after the executor): judged from here on.
            // Its earlier events (progress among them) went to another.
            (_, None) if owned && event != "mission.assigned" => {
                m.progressed = true;
                m.reconnected = event == "mission.reconnected";
                if event == "mission.suspended" {
                    m.checkpoint = frame["data"]["checkpoint_id"].as_str().map(str::to_owned);
                }
                match event {
                    "mission.reconnected" | "mission.suspended" => Some(Suspended),
                    "mission.hitl_required" => Some(WaitingForHuman),
                    "mission.completed" | "mission.failed" | "mission.aborted" => Some(Ended),
                    _ => Some(Running),
                }
            }
            ("mission.assigned", None) => Some(Assigned),
            ("mission.started", Some(Assigned)) => Some(Running),
            ("mission.progress", Some(Running | WaitingForHuman | Suspended)) => {
                m.progressed = true;
                from
            }
            ("mission.hitl_required", Some(Running | WaitingForHuman)) => Some(WaitingForHuman),
            ("mission.suspended", Some(Running | WaitingForHuman)) => {
                m.checkpoint = frame["data"]["checkpoint_id"].as_str().map(str::to_owned);
                m.reconnected = false;
                Some(Suspended)
            }
            ("mission.reconnected", Some(Suspended)) => {
                let presented = frame["data"]["checkpoint_id"].as_str();
                if m.checkpoint.is_some() && presented != m.checkpoint.as_deref() {
                    bad(format!(
                        "presents checkpoint {presented:?}, not the suspension's {:?}",
                        m.checkpoint
                    ));
                }
                m.reconnected = true;
                Some(Suspended)
            }
            ("mission.resumed", Some(Suspended)) => {
                if !m.reconnected {
                    bad("came without mission.reconnected".into());
                }
                Some(Running)
            }
            ("mission.completed", Some(Running | WaitingForHuman | Suspended)) => {
                if !m.progressed {
                    bad("came without a mission.progress before it".into());
                }
                Some(Ended)
            }
            ("mission.failed", Some(Assigned | Running | WaitingForHuman | Suspended)) => {
                Some(Ended)
            }
            ("mission.aborted", Some(Running | WaitingForHuman)) => Some(Ended),
            (_, None) => {
                bad("is the first event seen of a mission never assigned nor owned".into());
                None
            }
            (_, Some(s)) => {
                bad(format!("is not allowed while the mission is {s:?}"));
                Some(s)
            }
        };
        if to.is_some() {
            m.state = to;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ev(event: &str, data: Value) -> Value {
        json!({"event": event, "mission_id": "m", "data": data})
    }

    fn run(frames: &[Value]) -> Vec<String> {
        let mut t = Tracker::default();
        frames.iter().flat_map(|f| t.observe(1, f)).collect()
    }

    #[test]
    fn a_whole_life_with_a_restart_passes_and_resends_are_not_judged() {
        let progress = ev("mission.progress", json!({"iteration": 1}));
        let frames = [
            ev("mission.assigned", json!({})),
            ev("mission.started", json!({})),
            progress.clone(),
            ev("mission.hitl_required", json!({})),
            ev("mission.suspended", json!({"checkpoint_id": "c"})),
            json!({"event": "executor.resync", "data": {"owned_mission_ids": ["m"]}}),
            ev("mission.reconnected", json!({"checkpoint_id": "c"})),
            ev("mission.resumed", json!({})),
            progress,
            ev("mission.completed", json!({})),
        ];
        assert_eq!(run(&frames), Vec::<String>::new());
    }

    #[test]
    fn out_of_order_events_are_named() {
        let v = run(&[
            ev("mission.assigned", json!({})),
            ev("mission.progress", json!({})),
            ev("mission.started", json!({})),
            ev("mission.completed", json!({})),
            ev("mission.progress", json!({"iteration": 2})),
        ]);
        assert_eq!(v.len(), 3, "{v:?}");
        assert!(v[0].contains("progress is not allowed while the mission is Assigned"));
        assert!(v[1].contains("without a mission.progress"));
        assert!(v[2].contains("while the mission is Ended"));
        let v = run(&[
            ev("mission.assigned", json!({})),
            ev("mission.started", json!({})),
            ev("mission.suspended", json!({"checkpoint_id": "c"})),
            ev("mission.hitl_required", json!({})),
            ev("mission.reconnected", json!({"checkpoint_id": "other"})),
            ev("mission.resumed", json!({})),
        ]);
        assert_eq!(v.len(), 2, "{v:?}");
        assert!(v[0].contains("hitl_required is not allowed while the mission is Suspended"));
        assert!(v[1].contains("checkpoint"));
        assert_eq!(run(&[ev("mission.progress", json!({}))]).len(), 1);
    }

    #[test]
    fn a_resend_on_a_later_connection_passes_and_a_duplicate_on_the_same_does_not() {
        let mut t = Tracker::default();
        let done = ev("mission.completed", json!({}));
        for f in [
            ev("mission.assigned", json!({})),
            ev("mission.started", json!({})),
            ev("mission.progress", json!({})),
            done.clone(),
        ] {
            assert!(t.observe(1, &f).is_empty());
        }
        assert!(t.observe(2, &done).is_empty(), "resent after a reconnect");
        assert_eq!(t.observe(2, &done).len(), 1, "twice on one connection");
    }

    #[test]
    fn a_mission_first_seen_in_a_resync_is_judged_from_there() {
        let mut t = Tracker::default();
        let resync = json!({"event": "executor.resync", "data": {"owned_mission_ids": ["m"]}});
        assert!(t.observe(1, &resync).is_empty());
        for f in [
            ev("mission.reconnected", json!({"checkpoint_id": "c"})),
            ev("mission.resumed", json!({})),
            ev("mission.completed", json!({})),
        ] {
            assert_eq!(t.observe(1, &f), Vec::<String>::new());
        }
        assert_eq!(t.observe(1, &ev("mission.progress", json!({}))).len(), 1);
    }
}
