//! The executor contract's schema rules (`schemas/executor-v1.json` of the
//! AIWG repository), written out as checks: the schema file itself is not
//! vendored. Every check returns the violations it found, each naming the
//! JSON path, so a test failure says exactly what was wrong.
//!
//! Covered: register payloads, dispatch answers, mission status answers and
//! event envelopes, with `additionalProperties: false` everywhere, required
//! fields, constants, enums, formats (uuid, date-time, uri) and the
//! envelope's `oneOf` over the data shapes (data must match exactly one).

use serde_json::{Map, Value};

/// A field's expected type and constraint.
#[derive(Clone, Copy)]
enum Ty {
    Str {
        min: usize,
        max: usize,
    },
    Const(&'static str),
    OneOf(&'static [&'static str]),
    Ts,
    Uri,
    Uuid,
    /// A non-negative integer when `true`, any integer otherwise.
    Int(bool),
    Pct,
    UniqueStrings,
    Artifacts,
}

const ANY_STR: Ty = Ty::Str {
    min: 0,
    max: usize::MAX,
};
const NONEMPTY: Ty = Ty::Str {
    min: 1,
    max: usize::MAX,
};

/// One object shape: `(name, type, required)` per allowed field.
type Shape = &'static [(&'static str, Ty, bool)];

/// The data shape of each event type (`$defs/data_*`).
const DATA: &[(&str, Shape)] = &[
    (
        "executor.registered",
        &[
            ("name", ANY_STR, true),
            ("capabilities", Ty::UniqueStrings, true),
        ],
    ),
    (
        "executor.deregistered",
        &[(
            "reason",
            Ty::OneOf(&["graceful_shutdown", "operator_deleted", "timeout"]),
            true,
        )],
    ),
    (
        "executor.resync",
        &[
            ("owned_mission_ids", Ty::UniqueStrings, true),
            ("protocol_version", ANY_STR, false),
        ],
    ),
    (
        "mission.assigned",
        &[
            ("state", Ty::Const("assigned"), true),
            ("estimated_start", Ty::Ts, false),
        ],
    ),
    (
        "mission.started",
        &[
            ("state", Ty::Const("running"), true),
            ("agent_runtime", ANY_STR, false),
            ("pty_session_id", ANY_STR, false),
        ],
    ),
    (
        "mission.progress",
        &[
            ("phase", ANY_STR, false),
            ("iteration", Ty::Int(true), false),
            ("tokens_used", Ty::Int(true), false),
            ("summary", ANY_STR, false),
            ("pct_complete", Ty::Pct, false),
        ],
    ),
    (
        "mission.hitl_required",
        &[
            ("hitl_id", NONEMPTY, true),
            ("prompt", NONEMPTY, true),
            ("context", ANY_STR, false),
            ("expires_at", Ty::Ts, false),
        ],
    ),
    (
        "mission.hitl_responded",
        &[
            ("hitl_id", NONEMPTY, true),
            ("response", NONEMPTY, true),
            ("responded_at", Ty::Ts, false),
        ],
    ),
    (
        "mission.paused",
        &[
            ("state", Ty::Const("paused"), true),
            ("reason", ANY_STR, false),
        ],
    ),
    (
        "mission.resumed",
        &[
            ("state", Ty::Const("running"), true),
            ("resumed_from", Ty::OneOf(&["paused", "suspended"]), false),
        ],
    ),
    (
        "mission.suspended",
        &[
            ("state", Ty::Const("suspended"), true),
            ("checkpoint_id", NONEMPTY, true),
            ("reason", ANY_STR, false),
        ],
    ),
    ("mission.reconnected", &[("checkpoint_id", NONEMPTY, true)]),
    (
        "mission.completed",
        &[
            ("state", Ty::Const("done"), true),
            ("exit_code", Ty::Int(false), false),
            ("tokens_total", Ty::Int(true), false),
            ("summary", ANY_STR, false),
            ("artifacts", Ty::Artifacts, false),
        ],
    ),
    (
        "mission.failed",
        &[
            ("state", Ty::Const("failed"), true),
            ("reason", NONEMPTY, true),
            ("error", ANY_STR, false),
            ("exit_code", Ty::Int(false), false),
            ("tokens_total", Ty::Int(true), false),
        ],
    ),
    (
        "mission.aborted",
        &[
            ("state", Ty::Const("aborted"), true),
            ("aborted_by", Ty::OneOf(&["operator", "system"]), false),
            ("reason", ANY_STR, false),
        ],
    ),
];

/// The mission states of `$defs/mission_state`.
pub const MISSION_STATES: [&str; 9] = [
    "queued",
    "assigned",
    "running",
    "paused",
    "hitl-required",
    "suspended",
    "done",
    "failed",
    "aborted",
];

fn is_uuid(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    parts.len() == 5
        && parts
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(p, n)| p.len() == n && p.chars().all(|c| c.is_ascii_hexdigit()))
}

fn is_ts(s: &str) -> bool {
    humantime::parse_rfc3339(s).is_ok()
}

fn is_uri(s: &str) -> bool {
    s.split_once("://")
        .is_some_and(|(scheme, rest)| !scheme.is_empty() && !rest.is_empty())
}

fn check_value(path: &str, v: &Value, ty: Ty, out: &mut Vec<String>) {
    let bad = |out: &mut Vec<String>, what: &str| out.push(format!("{path}: {what}, got {v}"));
    match ty {
        Ty::Str { min, max } => match v.as_str() {
            Some(s) if (min..=max).contains(&s.chars().count()) => {}
            Some(_) => bad(out, &format!("length must be {min}..{max}")),
            None => bad(out, "must be a string"),
        },
        Ty::Const(c) => {
            if v.as_str() != Some(c) {
                bad(out, &format!("must be {c:?}"));
            }
        }
        Ty::OneOf(allowed) => {
            if !v.as_str().is_some_and(|s| allowed.contains(&s)) {
                bad(out, &format!("must be one of {allowed:?}"));
            }
        }
        Ty::Ts => {
            if !v.as_str().is_some_and(is_ts) {
                bad(out, "must be an RFC 3339 date-time");
            }
        }
        Ty::Uri => {
            if !v.as_str().is_some_and(is_uri) {
                bad(out, "must be a URI");
            }
        }
        Ty::Uuid => {
            if !v.as_str().is_some_and(is_uuid) {
                bad(out, "must be a UUID");
            }
        }
        Ty::Int(non_negative) => match v.as_i64() {
            Some(n) if !non_negative || n >= 0 => {}
            _ => bad(out, "must be an integer (non-negative where required)"),
        },
        Ty::Pct => {
            if !v.as_f64().is_some_and(|n| (0.0..=100.0).contains(&n)) {
                bad(out, "must be a number from 0 to 100");
            }
        }
        Ty::UniqueStrings => match v.as_array() {
            Some(items) => {
                let mut seen = std::collections::HashSet::new();
                for (i, item) in items.iter().enumerate() {
                    check_value(&format!("{path}[{i}]"), item, NONEMPTY, out);
                    if !seen.insert(item.to_string()) {
                        out.push(format!("{path}: items must be unique, {item} repeats"));
                    }
                }
            }
            None => bad(out, "must be an array"),
        },
        Ty::Artifacts => match v.as_array() {
            Some(items) => {
                for (i, item) in items.iter().enumerate() {
                    check_object(
                        &format!("{path}[{i}]"),
                        item,
                        &[("path", ANY_STR, true), ("description", ANY_STR, false)],
                        out,
                    );
                }
            }
            None => bad(out, "must be an array"),
        },
    }
}

fn check_object(path: &str, v: &Value, shape: Shape, out: &mut Vec<String>) {
    let Some(obj) = v.as_object() else {
        out.push(format!("{path}: must be an object, got {v}"));
        return;
    };
    for key in obj.keys() {
        if !shape.iter().any(|(name, _, _)| name == key) {
            out.push(format!(
                "{path}.{key}: not allowed (additionalProperties: false)"
            ));
        }
    }
    for &(name, ty, required) in shape {
        match obj.get(name) {
            Some(value) => check_value(&format!("{path}.{name}"), value, ty, out),
            None if required => out.push(format!("{path}.{name}: required")),
            None => {}
        }
    }
}

fn matches(v: &Value, shape: Shape) -> bool {
    let mut out = Vec::new();
    check_object("", v, shape, &mut out);
    out.is_empty()
}

/// Checks one event envelope (`$defs/event_envelope`).
pub fn check_envelope(v: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let Some(obj) = v.as_object() else {
        return vec![format!("envelope: must be an object, got {v}")];
    };
    let allowed = ["event", "executor_id", "mission_id", "ts", "data"];
    for key in obj.keys() {
        if !allowed.contains(&key.as_str()) {
            out.push(format!(
                "envelope.{key}: not allowed (additionalProperties: false)"
            ));
        }
    }
    let event = obj.get("event").and_then(Value::as_str).unwrap_or_default();
    let Some(&(_, shape)) = DATA.iter().find(|(name, _)| *name == event) else {
        out.push(format!("envelope.event: unknown event {event:?}"));
        return out;
    };
    match obj.get("executor_id") {
        Some(id) => check_value("envelope.executor_id", id, Ty::Uuid, &mut out),
        None => out.push("envelope.executor_id: required".into()),
    }
    match obj.get("ts") {
        Some(ts) => check_value("envelope.ts", ts, Ty::Ts, &mut out),
        None => out.push("envelope.ts: required".into()),
    }
    // "Present on all mission.* events. Omitted for executor.* events."
    match (event.starts_with("mission."), obj.get("mission_id")) {
        (true, Some(id)) => check_value("envelope.mission_id", id, NONEMPTY, &mut out),
        (true, None) => out.push(format!("envelope.mission_id: required on {event}")),
        (false, Some(_)) => out.push(format!("envelope.mission_id: omitted on {event}")),
        (false, None) => {}
    }
    if let Some(data) = obj.get("data") {
        check_object("envelope.data", data, shape, &mut out);
        // oneOf: the data must match exactly one of the shapes.
        let n = DATA.iter().filter(|(_, s)| matches(data, s)).count();
        if n > 1 {
            out.push(format!(
                "envelope.data: matches {n} of the data shapes; oneOf needs exactly one"
            ));
        }
    }
    out
}

/// Checks a `POST /api/v1/executors/register` body (`$defs/register_payload`).
pub fn check_register(v: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let Some(obj) = v.as_object() else {
        return vec![format!("register: must be an object, got {v}")];
    };
    let top: Shape = &[
        ("executor_id", Ty::Uuid, true),
        ("a2a_instance_id", NONEMPTY, false),
        ("name", Ty::Str { min: 1, max: 128 }, true),
        ("version", Ty::Str { min: 1, max: 64 }, true),
        ("spec_version", Ty::Const("1.0.0"), true),
    ];
    let mut copy: Map<String, Value> = obj.clone();
    let endpoints = copy.remove("transport_endpoints");
    let caps = copy.remove("capabilities");
    check_object("register", &Value::Object(copy), top, &mut out);
    match endpoints {
        Some(e) => check_object(
            "register.transport_endpoints",
            &e,
            &[
                ("rest", Ty::Uri, true),
                ("ws", Ty::Uri, true),
                ("grpc", Ty::Uri, false),
            ],
            &mut out,
        ),
        None => out.push("register.transport_endpoints: required".into()),
    }
    match caps {
        Some(c) => {
            check_value("register.capabilities", &c, Ty::UniqueStrings, &mut out);
            for (i, cap) in c.as_array().into_iter().flatten().enumerate() {
                if !cap.as_str().is_some_and(is_capability) {
                    out.push(format!(
                        "register.capabilities[{i}]: {cap} matches no capability pattern"
                    ));
                }
            }
        }
        None => out.push("register.capabilities: required".into()),
    }
    out
}

/// `[a-z][a-z0-9_-]*`
fn is_slug(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

/// `$defs/capability` (its `oneOf` of patterns and constants).
pub fn is_capability(s: &str) -> bool {
    if let Some(rest) = s.strip_prefix("isolation:") {
        return is_slug(rest);
    }
    if let Some(rest) = s.strip_prefix("runtime:") {
        return matches!(rest, "claude-code" | "codex" | "cursor" | "aider")
            || rest.strip_prefix("custom:").is_some_and(is_slug);
    }
    if let Some(rest) = s.strip_prefix("platform:") {
        return rest.split_once('/').is_some_and(|(os, arch)| {
            is_slug(os)
                && !arch.is_empty()
                && arch.starts_with(|c: char| c.is_ascii_lowercase())
                && arch
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
        });
    }
    if let Some(rest) = s.strip_prefix("x-") {
        let mut chars = rest.chars();
        return chars.next().is_some_and(|c| c.is_ascii_lowercase())
            && chars.all(|c| {
                c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == ':' || c == '-'
            });
    }
    matches!(s, "resumable" | "hitl" | "multi-tenant")
}

/// Checks the `202` answer to a dispatch (`$defs/dispatch_response`).
pub fn check_dispatch_response(v: &Value) -> Vec<String> {
    let mut out = Vec::new();
    check_object(
        "dispatch_response",
        v,
        &[
            ("mission_id", NONEMPTY, true),
            ("executor_id", Ty::Uuid, true),
            ("a2a_instance_id", NONEMPTY, false),
            ("status", Ty::Const("assigned"), true),
            ("estimated_start", Ty::Ts, false),
        ],
        &mut out,
    );
    out
}

/// Checks `GET /api/v1/missions/{id}` (`$defs/mission_status_response`).
pub fn check_mission_status(v: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let Some(obj) = v.as_object() else {
        return vec![format!("mission_status: must be an object, got {v}")];
    };
    let mut copy = obj.clone();
    let events = copy.remove("recent_events");
    check_object(
        "mission_status",
        &Value::Object(copy),
        &[
            ("mission_id", NONEMPTY, true),
            ("executor_id", Ty::Uuid, true),
            ("state", Ty::OneOf(&MISSION_STATES), true),
            ("created_at", Ty::Ts, true),
            ("updated_at", Ty::Ts, true),
            ("completed_at", Ty::Ts, false),
            ("pty_session_ref", ANY_STR, false),
            ("exit_code", Ty::Int(false), false),
            ("error", ANY_STR, false),
        ],
        &mut out,
    );
    match events.as_ref().map(Value::as_array) {
        None => {}
        Some(Some(list)) => {
            for (i, e) in list.iter().enumerate() {
                out.extend(
                    check_envelope(e)
                        .into_iter()
                        .map(|v| format!("mission_status.recent_events[{i}]: {v}")),
                );
            }
        }
        Some(None) => out.push("mission_status.recent_events: must be an array".into()),
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const EXEC: &str = "01936f3e-7a1b-7c2d-8e3f-0123456789ab";

    fn env(event: &str, data: Value) -> Value {
        json!({"event": event, "executor_id": EXEC, "mission_id": "m-1",
               "ts": "2026-11-30T07:00:00.123Z", "data": data})
    }

    #[test]
    fn good_envelopes_pass() {
        for (event, data) in [
            (
                "mission.assigned",
                json!({"state": "assigned", "estimated_start": "2026-11-30T07:00:00.123Z"}),
            ),
            (
                "mission.started",
                json!({"state": "running", "agent_runtime": "x"}),
            ),
            (
                "mission.progress",
                json!({"phase": "execution", "iteration": 2, "summary": "ok"}),
            ),
            (
                "mission.resumed",
                json!({"state": "running", "resumed_from": "suspended"}),
            ),
            (
                "mission.completed",
                json!({"state": "done", "exit_code": 0}),
            ),
            (
                "mission.failed",
                json!({"state": "failed", "reason": "non_zero_exit", "exit_code": 3}),
            ),
            ("mission.reconnected", json!({"checkpoint_id": "c"})),
        ] {
            assert_eq!(
                check_envelope(&env(event, data)),
                Vec::<String>::new(),
                "{event}"
            );
        }
        let resync = json!({"event": "executor.resync", "executor_id": EXEC,
                            "ts": "2026-11-30T07:00:00Z", "data": {"owned_mission_ids": []}});
        assert_eq!(check_envelope(&resync), Vec::<String>::new());
    }

    #[test]
    fn violations_are_named() {
        let cases = [
            (
                env("mission.started", json!({"state": "running", "x": 1})),
                "envelope.data.x: not allowed",
            ),
            (
                env("mission.started", json!({"state": "running"})),
                "oneOf needs exactly one",
            ),
            (
                env("mission.failed", json!({"state": "failed"})),
                "envelope.data.reason: required",
            ),
            (
                env("mission.completed", json!({"state": "completed"})),
                "must be \"done\"",
            ),
            (env("mission.nope", json!({})), "unknown event"),
            (
                json!({"event": "executor.resync", "executor_id": EXEC, "mission_id": "m",
                    "ts": "2026-11-30T07:00:00Z", "data": {"owned_mission_ids": []}}),
                "omitted on executor.resync",
            ),
            (
                json!({"event": "mission.assigned", "executor_id": "e-1",
                    "ts": "yesterday", "mission_id": "m", "data": {"state": "assigned"}}),
                "must be a UUID",
            ),
        ];
        for (v, want) in cases {
            let got = check_envelope(&v).join("\n");
            assert!(got.contains(want), "{v}: {got}");
        }
    }

    #[test]
    fn register_payloads_are_checked() {
        let good = json!({"executor_id": EXEC, "name": "agentic-sandbox", "version": "0.1.0",
            "spec_version": "1.0.0",
            "transport_endpoints": {"rest": "http://127.0.0.1:8122", "ws": "ws://127.0.0.1:8122"},
            "capabilities": ["isolation:host", "isolation:confined", "platform:linux/x64",
                             "runtime:custom:command", "resumable", "hitl"]});
        assert_eq!(check_register(&good), Vec::<String>::new());
        let mut bad = good.clone();
        bad["capabilities"] = json!(["isolation:Host", "hitl", "hitl"]);
        bad["spec_version"] = json!("2.0.0");
        bad["extra"] = json!(true);
        let got = check_register(&bad).join("\n");
        for want in [
            "no capability pattern",
            "unique",
            "must be \"1.0.0\"",
            "register.extra",
        ] {
            assert!(got.contains(want), "{want}: {got}");
        }
    }
}
