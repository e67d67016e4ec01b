//! `loom demo`: the whole product in one command, offline. It starts a real `loom` process whose
//! two downstream servers are demo servers served by this same binary ([`servers`]), talks to it
//! as an MCP client over stdio, and prints what happens to each result.

pub(crate) mod servers;

use std::path::Path;
use std::process::Stdio;

use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{Peer, RoleClient};
use serde_json::{Value, json};

use crate::common::tokens::estimate_tokens;
use crate::wire::LineTransport;

/// Rows the demo asks for: large enough to show the point, small enough to run in seconds.
const CUSTOMERS: u64 = 5_000;
const ORDERS: u64 = 20_000;

fn text_of(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

async fn call(peer: &Peer<RoleClient>, tool: &str, args: Value) -> Result<CallToolResult, String> {
    let mut params = CallToolRequestParams::new(tool.to_string());
    if let Value::Object(map) = args {
        params = params.with_arguments(map);
    }
    let result = peer
        .call_tool(params)
        .await
        .map_err(|e| format!("{tool} failed: {e}"))?;
    if result.is_error == Some(true) {
        return Err(format!("{tool} returned an error: {}", text_of(&result)));
    }
    Ok(result)
}

fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Print query rows as an aligned table.
fn print_rows(result: &Value) {
    let Some(rows) = result["rows"].as_array() else {
        return;
    };
    let columns: Vec<String> = result["columns"]
        .as_array()
        .map(|c| {
            c.iter()
                .filter_map(|c| c["name"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|row| {
            columns
                .iter()
                .map(|c| match &row[c] {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect()
        })
        .collect();
    let widths: Vec<usize> = columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            cells
                .iter()
                .map(|r| r[i].chars().count())
                .chain([c.len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |values: &[String]| {
        let padded: Vec<String> = values
            .iter()
            .zip(&widths)
            .map(|(v, w)| format!("{v:>w$}"))
            .collect();
        println!("      {}", padded.join("  "));
    };
    line(&columns);
    for row in &cells {
        line(row);
    }
}

/// Run the demo. `loom` is this binary; `keep` keeps the export there; `snapshot` turns session
/// snapshots on under that root and re-opens the session with `loom query` at the end.
pub(crate) async fn run(
    loom: &Path,
    keep: Option<&Path>,
    snapshot: Option<&Path>,
) -> Result<(), String> {
    let workdir = tempfile::Builder::new()
        .prefix("loom-demo-")
        .tempdir()
        .map_err(|e| format!("cannot create a working directory: {e}"))?;
    let exports = match keep {
        Some(dir) => dir.to_path_buf(),
        None => workdir.path().join("exports"),
    };
    let mut config = json!({
        "exportDir": exports,
        "servers": [
            {"name": "crm", "command": loom, "args": ["demo-server", "crm"]},
            {"name": "shop", "command": loom, "args": ["demo-server", "shop"]},
        ]
    });
    if let Some(root) = snapshot {
        config["snapshot"] = json!({ "url": root });
    }
    let config_path = workdir.path().join("loom.config.json");
    std::fs::write(&config_path, config.to_string())
        .map_err(|e| format!("cannot write the demo config: {e}"))?;

    println!(
        "loom demo — one MCP gateway in front of two servers, and what it does with large results\n"
    );
    println!("  1. Starting loom with two demo servers: `crm` (customers) and `shop` (orders).");
    let mut child = tokio::process::Command::new(loom)
        .arg("--config")
        .arg(&config_path)
        .env("LOOM_LOG", "error")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot start loom: {e}"))?;
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err("loom's pipes were not created".into());
    };
    let client = ()
        .serve(LineTransport::plain(stdout, stdin, "loom"))
        .await
        .map_err(|e| format!("MCP handshake with loom failed: {e}"))?;
    let peer = client.peer().clone();
    let tools = peer
        .list_all_tools()
        .await
        .map_err(|e| format!("tools/list failed: {e}"))?;
    let names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
    println!(
        "     loom lists {} tools: {}\n",
        names.len(),
        names.join(", ")
    );

    println!("  2. A small result passes through untouched:");
    let pong = call(&peer, "crm_ping", json!({})).await?;
    println!("     crm_ping → {:?}\n", text_of(&pong));

    println!("  3. A large result becomes an envelope:");
    let customers = servers::customers(CUSTOMERS).to_string();
    let result = call(&peer, "crm_search_customers", json!({"limit": CUSTOMERS})).await?;
    let envelope = result.structured_content.clone().unwrap_or(Value::Null);
    let envelope_text = text_of(&result);
    println!(
        "     crm_search_customers {{limit: {CUSTOMERS}}}: the server sent {} bytes (~{} tokens);",
        thousands(customers.len() as u64),
        thousands(estimate_tokens(&customers) as u64)
    );
    println!(
        "     the model gets a {}-character envelope (~{} tokens): ref `{}`, {} rows, {} columns.\n",
        thousands(envelope_text.chars().count() as u64),
        thousands(estimate_tokens(&envelope_text) as u64),
        envelope["ref"].as_str().unwrap_or("?"),
        envelope["rows"],
        envelope["schema"].as_array().map_or(0, Vec::len)
    );
    let customers_ref = envelope["ref"].as_str().unwrap_or_default().to_string();

    println!("  4. A second server's result; its envelope says how the two join:");
    let result = call(
        &peer,
        "shop_list_orders",
        json!({"count": ORDERS, "customers": CUSTOMERS}),
    )
    .await?;
    let orders_envelope = result.structured_content.clone().unwrap_or(Value::Null);
    let orders_ref = orders_envelope["ref"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    println!(
        "     shop_list_orders {{count: {ORDERS}}} → `{orders_ref}` ({} rows, {} characters)",
        orders_envelope["rows"],
        thousands(text_of(&result).chars().count() as u64)
    );
    if let Some(hint) = orders_envelope["joinHints"]
        .as_array()
        .and_then(|h| h.first())
    {
        println!(
            "     join hint: {}.{} ↔ {}.{} (score {}, containment {})",
            orders_ref,
            hint["column"].as_str().unwrap_or("?"),
            hint["ref"].as_str().unwrap_or("?"),
            hint["otherColumn"].as_str().unwrap_or("?"),
            hint["score"],
            hint["containment"]
        );
    }
    println!();

    println!("  5. The model asks exactly what it needs — one query across both servers:");
    let sql = format!(
        "SELECT c.country, count(*) AS orders, round(sum(o.amount), 2) AS revenue \
         FROM {orders_ref} o JOIN {customers_ref} c ON o.customer_id = c.customer_id \
         WHERE o.status <> 'refunded' GROUP BY c.country ORDER BY revenue DESC LIMIT 5"
    );
    println!("     {sql}");
    let answer = call(&peer, "loom_query", json!({ "sql": sql })).await?;
    let answer_value = answer.structured_content.clone().unwrap_or(Value::Null);
    print_rows(&answer_value);
    println!();

    println!("  6. A materialized view keeps a result, types intact:");
    let view = call(
        &peer,
        "loom_materialize",
        json!({"name": "revenue_by_plan", "sql": format!(
            "SELECT c.plan, count(*) AS orders, sum(o.amount) AS revenue FROM {orders_ref} o \
             JOIN {customers_ref} c ON o.customer_id = c.customer_id GROUP BY c.plan")}),
    )
    .await?;
    let view_value = view.structured_content.clone().unwrap_or(Value::Null);
    let types: Vec<String> = view_value["schema"]
        .as_array()
        .map(|s| {
            s.iter()
                .map(|c| {
                    format!(
                        "{} {}",
                        c["name"].as_str().unwrap_or("?"),
                        c["type"].as_str().unwrap_or("?")
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    println!(
        "     `{}`: {}\n",
        view_value["ref"].as_str().unwrap_or("?"),
        types.join(", ")
    );

    println!("  7. And an export, written by loom's own serializer:");
    let written = call(
        &peer,
        "loom_export",
        json!({"ref": "ds_view_revenue_by_plan", "format": "csv"}),
    )
    .await?;
    let written = written.structured_content.unwrap_or(Value::Null);
    println!(
        "     {} ({} rows, {} bytes){}\n",
        written["path"].as_str().unwrap_or("?"),
        written["rows"],
        written["bytes"],
        if keep.is_some() {
            ""
        } else {
            " — removed when the demo ends; pass --keep DIR to keep it"
        }
    );

    let _ = client.cancel().await;
    let _ = tokio::time::timeout(std::time::Duration::from_secs(3), child.wait()).await;

    if let Some(root) = snapshot {
        println!(
            "  8. The session was snapshotted to Parquet; `loom query` re-opens it after loom is gone:"
        );
        let sql = format!(
            "SELECT status, count(*) AS orders FROM {orders_ref} GROUP BY status ORDER BY status"
        );
        println!("     loom query --snapshot {} \"{sql}\"", root.display());
        let out = tokio::process::Command::new(loom)
            .arg("query")
            .arg("--snapshot")
            .arg(root)
            .arg(&sql)
            .output()
            .await
            .map_err(|e| format!("cannot run loom query: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "loom query failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            println!("     {line}");
        }
        println!();
    }
    println!(
        "Done. Point your MCP client at `loom --config <file>` to put loom in front of your own servers."
    );
    Ok(())
}
