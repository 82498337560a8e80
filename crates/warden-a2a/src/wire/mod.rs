//! Wire shapes per protocol version.

pub mod rest03;
pub mod v03;
pub mod v1;

use serde_json::Value;

/// `message_id` → `messageId`.
fn lower_camel(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    let mut upper = false;
    for c in key.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// ProtoJSON parsers accept a field's proto name as well as its JSON name
/// (the Python SDK's 0.3 REST client sends proto names): renames keys to
/// their JSON names, leaving free-form values (`metadata`, a data part's
/// `data`) as they are.
pub fn json_names(v: &mut Value) {
    match v {
        Value::Object(map) => {
            let keys: Vec<String> = map.keys().filter(|k| k.contains('_')).cloned().collect();
            for k in keys {
                if let Some(val) = map.remove(&k) {
                    map.entry(lower_camel(&k)).or_insert(val);
                }
            }
            for (k, val) in map.iter_mut() {
                // A data part ({"data": {"data": …}}) has no names to fix.
                if k != "metadata" && k != "data" {
                    json_names(val);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(json_names),
        _ => {}
    }
}
