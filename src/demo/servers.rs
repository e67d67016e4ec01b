//! The demo's downstream servers, served by the `loom` binary itself (`loom demo-server crm` /
//! `loom demo-server shop`), so `loom demo` needs nothing but the binary: a small CRM and a small
//! shop whose orders refer to the CRM's customers.

use std::sync::Arc;

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ServerHandler, ServiceExt};
use serde_json::{Map, Value, json};

use crate::wire::LineTransport;

/// A deterministic pseudo-random sequence (the demo prints the same story every time).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, below: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % below.max(1)
    }
}

const COUNTRIES: [&str; 8] = ["DE", "FR", "JP", "US", "BR", "IN", "NL", "KE"];
const PLANS: [&str; 3] = ["free", "pro", "team"];
const STATUS: [&str; 4] = ["paid", "paid", "shipped", "refunded"];

/// Customers 1..=count.
pub(crate) fn customers(count: u64) -> Value {
    let mut rng = Lcg(7);
    Value::Array(
        (1..=count)
            .map(|id| {
                let plan = PLANS[rng.next(3) as usize];
                json!({
                    "customer_id": id,
                    "name": format!("Customer {id}"),
                    "email": format!("customer{id}@example.com"),
                    "country": COUNTRIES[rng.next(8) as usize],
                    "plan": plan,
                    "signed_up": format!("2024-{:02}-{:02}", 1 + rng.next(12), 1 + rng.next(28)),
                    "mrr": match plan { "free" => 0.0, "pro" => 29.0, _ => 99.0 },
                })
            })
            .collect(),
    )
}

/// Orders whose `customer_id` refers to customers 1..=customers.
pub(crate) fn orders(count: u64, customers: u64) -> Value {
    let mut rng = Lcg(11);
    Value::Array(
        (1..=count)
            .map(|n| {
                json!({
                    "order_id": 500_000 + n,
                    "customer_id": 1 + rng.next(customers),
                    "amount": (rng.next(20_000) as f64) / 100.0 + 5.0,
                    "status": STATUS[rng.next(4) as usize],
                    "placed_at": format!("2025-{:02}-{:02}T{:02}:{:02}:00Z",
                        1 + rng.next(12), 1 + rng.next(28), rng.next(24), rng.next(60)),
                })
            })
            .collect(),
    )
}

#[derive(Clone)]
struct DemoServer {
    kind: Kind,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Crm,
    Shop,
}

impl Kind {
    pub(crate) fn parse(text: &str) -> Option<Self> {
        match text {
            "crm" => Some(Self::Crm),
            "shop" => Some(Self::Shop),
            _ => None,
        }
    }
}

fn schema(properties: Value) -> Arc<Map<String, Value>> {
    Arc::new(
        json!({"type": "object", "properties": properties})
            .as_object()
            .cloned()
            .unwrap_or_default(),
    )
}

fn count_arg(params: &CallToolRequestParams, name: &str, default: u64, max: u64) -> u64 {
    params
        .arguments
        .as_ref()
        .and_then(|a| a.get(name))
        .and_then(Value::as_u64)
        .unwrap_or(default)
        .min(max)
}

impl ServerHandler for DemoServer {
    fn get_info(&self) -> ServerConfig {
        let name = match self.kind {
            Kind::Crm => "demo-crm",
            Kind::Shop => "demo-shop",
        };
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(name, env!("CARGO_PKG_VERSION")))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let tools = match self.kind {
            Kind::Crm => vec![
                Tool::new("ping", "Answers pong (a small result).", schema(json!({}))),
                Tool::new(
                    "search_customers",
                    "Customers as a JSON array (customer_id, name, email, country, plan, signed_up, mrr).",
                    schema(json!({"limit": {"type": "integer"}})),
                ),
            ],
            Kind::Shop => vec![Tool::new(
                "list_orders",
                "Orders as a JSON array (order_id, customer_id, amount, status, placed_at).",
                schema(json!({"count": {"type": "integer"}, "customers": {"type": "integer"}})),
            )],
        };
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        params: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let text = match (self.kind, params.name.as_ref()) {
            (Kind::Crm, "ping") => "pong".to_string(),
            (Kind::Crm, "search_customers") => {
                customers(count_arg(&params, "limit", 100, 100_000)).to_string()
            }
            (Kind::Shop, "list_orders") => orders(
                count_arg(&params, "count", 100, 500_000),
                count_arg(&params, "customers", 5000, 1_000_000),
            )
            .to_string(),
            (_, other) => {
                return Err(McpError::invalid_params(
                    format!("unknown tool `{other}`"),
                    None,
                ));
            }
        };
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into())
    }
}

/// Serve one demo server over stdio until stdin closes.
pub(crate) async fn serve(kind: Kind) -> Result<(), String> {
    let transport = LineTransport::plain(tokio::io::stdin(), tokio::io::stdout(), "client");
    let service = DemoServer { kind }
        .serve(transport)
        .await
        .map_err(|e| format!("demo server: {e}"))?;
    let _ = service.waiting().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_is_deterministic_and_orders_refer_to_customers() {
        assert_eq!(customers(3), customers(3));
        let orders = orders(1000, 50);
        let ids: Vec<u64> = orders
            .as_array()
            .expect("array")
            .iter()
            .filter_map(|o| o["customer_id"].as_u64())
            .collect();
        assert!(ids.iter().all(|id| (1..=50).contains(id)));
    }
}
