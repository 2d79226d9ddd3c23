//! Operating the `agentic` binary: the traces it exports to a real OTLP receiver (HTTP and
//! gRPC, decoded with the OpenTelemetry protocol's own types), the `/metrics` it serves (parsed
//! as Prometheus text), and what its prices make of token counts.

// Test helpers outside #[test] functions may unwrap too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use prost::Message as _;
use support::{Script, agentic, command, database_url, scratch, script, serve_with, text};

/// One exported span, flattened: its ids, name, attributes, and its resource's attributes.
#[derive(Debug, Clone)]
struct Span {
    trace_id: String,
    span_id: String,
    parent: String,
    name: String,
    attributes: HashMap<String, AnyValue>,
    resource: HashMap<String, AnyValue>,
}

impl Span {
    fn text(&self, key: &str) -> Option<&str> {
        match self.attributes.get(key) {
            Some(AnyValue::StringValue(value)) => Some(value),
            _ => None,
        }
    }

    fn number(&self, key: &str) -> Option<f64> {
        match self.attributes.get(key) {
            Some(AnyValue::IntValue(value)) => Some(*value as f64),
            Some(AnyValue::DoubleValue(value)) => Some(*value),
            _ => None,
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn attributes(list: &[KeyValue]) -> HashMap<String, AnyValue> {
    list.iter()
        .filter_map(|pair| {
            let value = pair.value.as_ref()?.value.clone()?;
            Some((pair.key.clone(), value))
        })
        .collect()
}

/// What a receiver got, shared between its server task and the test.
type Received = Arc<Mutex<Vec<Span>>>;

fn keep(received: &Received, request: ExportTraceServiceRequest) {
    let mut spans = received.lock().unwrap();
    for resource_spans in request.resource_spans {
        let resource = resource_spans
            .resource
            .as_ref()
            .map(|resource| attributes(&resource.attributes))
            .unwrap_or_default();
        for scope in resource_spans.scope_spans {
            for span in scope.spans {
                spans.push(Span {
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent: hex(&span.parent_span_id),
                    name: span.name.clone(),
                    attributes: attributes(&span.attributes),
                    resource: resource.clone(),
                });
            }
        }
    }
}

/// An OTLP/HTTP receiver on loopback: `POST /v1/traces` with a protobuf body.
async fn http_receiver() -> (String, Received) {
    let received = Received::default();
    let kept = received.clone();
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |body: axum::body::Bytes| {
            let kept = kept.clone();
            async move {
                match ExportTraceServiceRequest::decode(body) {
                    Ok(request) => {
                        keep(&kept, request);
                        (
                            axum::http::StatusCode::OK,
                            [("content-type", "application/x-protobuf")],
                            ExportTraceServiceResponse::default().encode_to_vec(),
                        )
                    }
                    Err(_) => (
                        axum::http::StatusCode::BAD_REQUEST,
                        [("content-type", "text/plain")],
                        b"not an ExportTraceServiceRequest".to_vec(),
                    ),
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{address}"), received)
}

/// An OTLP/gRPC receiver on loopback.
struct GrpcReceiver(Received);

#[tonic::async_trait]
impl TraceService for GrpcReceiver {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        keep(&self.0, request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

async fn grpc_receiver() -> (String, Received) {
    let received = Received::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let service = TraceServiceServer::new(GrpcReceiver(received.clone()));
    tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
            .await
    });
    (format!("http://{address}"), received)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// The spans received so far, once `ready` holds of them (or the deadline passes).
fn spans_when(received: &Received, ready: impl Fn(&[Span]) -> bool) -> Vec<Span> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let spans = received.lock().unwrap().clone();
        if ready(&spans) || Instant::now() > deadline {
            return spans;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn names(spans: &[Span]) -> Vec<&str> {
    spans.iter().map(|span| span.name.as_str()).collect()
}

/// A config file with a price table for the scripted model (`script-normal`).
fn priced_config() -> std::path::PathBuf {
    let path = scratch().join("priced.toml");
    std::fs::write(
        &path,
        "[prices.script]\ninput = 2.5\noutput = 10.0\n\n[prices.\"script-high\"]\ninput = 100\noutput = 100\n",
    )
    .unwrap();
    path
}

/// A code-mode script whose program calls two tools, one of them twice in `parallel()`.
fn nested_calls() -> Script {
    script(
        "traced",
        "- code: |\n    const here = timeNow({ timezone: \"UTC\" });\n    const both = parallel([{ tool: \"time.now\", input: { timezone: \"Asia/Tokyo\" } }, { tool: \"time.now\", input: { timezone: \"Europe/Oslo\" } }]);\n    done(\"Zones: \" + here.timezone + \" \" + both.length);\n  usage: { input: 1000, output: 200 }\n",
    )
}

/// A code-mode prompt exports its span tree over OTLP/HTTP when the process ends: the prompt,
/// the model call under it with the GenAI attributes (tokens, finish reason, cost), the code
/// execution under the prompt, and the script's three tool calls under the execution.
/// Payloads stay out of spans unless asked for.
#[test]
fn a_code_prompt_exports_its_span_tree_over_otlp_http() {
    let runtime = runtime();
    let (endpoint, received) = runtime.block_on(http_receiver());
    let turns = nested_calls();
    let config = priced_config();
    let output = command(
        &[
            "--config",
            config.to_str().unwrap(),
            "prompt",
            "Which zones?",
            "-m",
            "code",
        ],
        Some(&turns),
    )
    .env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)
    .env_remove("OTEL_EXPORTER_OTLP_PROTOCOL")
    .env_remove("OTEL_SERVICE_NAME")
    .output()
    .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert_eq!(text(&output.stdout).trim(), "Zones: UTC 2");
    // The process flushed before it exited: everything is there already.
    let spans = received.lock().unwrap().clone();

    let prompt = spans
        .iter()
        .find(|span| span.name == "invoke_agent agentic")
        .unwrap_or_else(|| panic!("no prompt span in {:?}", names(&spans)));
    assert_eq!(prompt.parent, "", "the prompt of a CLI run is a root span");
    assert_eq!(prompt.text("gen_ai.operation.name"), Some("invoke_agent"));
    assert_eq!(prompt.text("agentic.mode"), Some("code"));
    assert_eq!(prompt.text("agentic.prompt.state"), Some("completed"));
    assert!(
        prompt.text("gen_ai.conversation.id").is_some(),
        "{prompt:?}"
    );
    assert!(prompt.text("agentic.prompt.input").is_none(), "{prompt:?}");
    assert!(
        matches!(prompt.resource.get("service.name"), Some(AnyValue::StringValue(name)) if name == "agentic"),
        "{:?}",
        prompt.resource
    );
    let under = |parent: &Span| -> Vec<&Span> {
        spans
            .iter()
            .filter(|span| span.parent == parent.span_id && span.trace_id == parent.trace_id)
            .collect()
    };

    let chats: Vec<&Span> = under(prompt)
        .into_iter()
        .filter(|span| span.name == "chat script-normal")
        .collect();
    assert_eq!(chats.len(), 1, "{:?}", names(&spans));
    let chat = chats[0];
    assert_eq!(chat.text("gen_ai.operation.name"), Some("chat"));
    assert_eq!(chat.text("gen_ai.provider.name"), Some("script"));
    assert_eq!(chat.text("gen_ai.request.model"), Some("script-normal"));
    assert_eq!(chat.number("gen_ai.usage.input_tokens"), Some(1000.0));
    assert_eq!(chat.number("gen_ai.usage.output_tokens"), Some(200.0));
    assert_eq!(chat.text("gen_ai.response.finish_reasons"), Some("stop"));
    // 1,000 tokens at 2.5 and 200 at 10 per million.
    let cost = chat.number("agentic.usage.cost").unwrap();
    assert!((cost - 0.0045).abs() < 1e-12, "{cost}");
    assert!(chat.text("gen_ai.input.messages").is_none(), "{chat:?}");
    assert!((prompt.number("agentic.usage.cost").unwrap() - 0.0045).abs() < 1e-12);

    let executions: Vec<&Span> = under(prompt)
        .into_iter()
        .filter(|span| span.name == "execute_code")
        .collect();
    assert_eq!(executions.len(), 1, "{:?}", names(&spans));
    let execution = executions[0];
    assert_eq!(execution.text("gen_ai.tool.name"), Some("code.execute"));
    let tools = under(execution);
    assert_eq!(tools.len(), 3, "{:?}", names(&spans));
    for tool in &tools {
        assert_eq!(tool.name, "execute_tool time.now");
        assert_eq!(tool.text("gen_ai.operation.name"), Some("execute_tool"));
        assert_eq!(tool.text("gen_ai.tool.name"), Some("time.now"));
        assert!(
            tool.text("gen_ai.tool.call.id")
                .is_some_and(|id| !id.is_empty()),
            "{tool:?}"
        );
        assert!(
            tool.text("gen_ai.tool.call.arguments").is_none(),
            "{tool:?}"
        );
    }
}

/// With payloads turned on, the spans carry the prompt, the model's messages and the tool
/// calls' arguments and results.
#[test]
fn payloads_are_recorded_only_when_asked_for() {
    let runtime = runtime();
    let (endpoint, received) = runtime.block_on(http_receiver());
    let turns = nested_calls();
    let output = command(
        &["prompt", "Which zones, with payloads?", "-m", "code"],
        Some(&turns),
    )
    .env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)
    .env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    .env("AGENTIC_TRACE_PAYLOADS", "1")
    .output()
    .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let spans = received.lock().unwrap().clone();
    let prompt = spans
        .iter()
        .find(|span| span.name == "invoke_agent agentic")
        .unwrap_or_else(|| panic!("no prompt span in {:?}", names(&spans)));
    assert_eq!(
        prompt.text("agentic.prompt.input"),
        Some("Which zones, with payloads?")
    );
    assert_eq!(prompt.text("agentic.prompt.answer"), Some("Zones: UTC 2"));
    let chat = spans
        .iter()
        .find(|span| span.name.starts_with("chat "))
        .unwrap();
    assert!(
        chat.text("gen_ai.input.messages")
            .is_some_and(|messages| messages.contains("Which zones, with payloads?")),
        "{chat:?}"
    );
    assert!(
        chat.text("gen_ai.output.messages")
            .is_some_and(|messages| messages.contains("parallel")),
        "{chat:?}"
    );
    let execution = spans
        .iter()
        .find(|span| span.name == "execute_code")
        .unwrap();
    assert!(
        execution
            .text("agentic.code")
            .is_some_and(|code| code.contains("timeNow"))
    );
    let tool = spans
        .iter()
        .find(|span| span.name == "execute_tool time.now")
        .unwrap();
    assert!(
        tool.text("gen_ai.tool.call.arguments")
            .is_some_and(|arguments| arguments.contains("timezone")),
        "{tool:?}"
    );
    assert!(
        tool.text("gen_ai.tool.call.result")
            .is_some_and(|result| result.contains("weekday")),
        "{tool:?}"
    );
}

/// `agentic serve` exports over OTLP/gRPC, and a request's W3C `traceparent` makes the caller's
/// span the parent of the request's span, under which the prompt it started runs.
#[test]
fn serve_exports_over_grpc_under_the_callers_traceparent() {
    let runtime = runtime();
    let (endpoint, received) = runtime.block_on(grpc_receiver());
    let turns = script("grpc", "- text: Traced over gRPC.\n");
    let (mut server, url, log) = serve_with(
        &turns,
        &database_url(),
        &[],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ("OTEL_SERVICE_NAME", "agentic-test"),
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ],
    );
    let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    let caller = "00f067aa0ba902b7";
    let started: serde_json::Value = runtime.block_on(async {
        reqwest::Client::new()
            .post(format!("{url}/api/prompt"))
            .header("traceparent", format!("00-{trace_id}-{caller}-01"))
            .header("x-user-id", "tracer")
            .json(&serde_json::json!({ "input": "Hello" }))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    });
    assert!(started["promptId"].is_string(), "{started}");
    let spans = spans_when(&received, |spans| {
        spans.iter().any(|span| span.name == "invoke_agent agentic")
            && spans.iter().any(|span| span.name == "POST /api/prompt")
    });
    let request = spans
        .iter()
        .find(|span| span.name == "POST /api/prompt")
        .unwrap_or_else(|| {
            panic!(
                "no request span in {:?}; server log:\n{}",
                names(&spans),
                log.lock().unwrap()
            )
        });
    assert_eq!(request.trace_id, trace_id);
    assert_eq!(request.parent, caller);
    assert_eq!(request.text("http.request.method"), Some("POST"));
    assert_eq!(request.text("http.route"), Some("/api/prompt"));
    assert_eq!(request.number("http.response.status_code"), Some(202.0));
    assert!(
        matches!(request.resource.get("service.name"), Some(AnyValue::StringValue(name)) if name == "agentic-test"),
        "{:?}",
        request.resource
    );
    let prompt = spans
        .iter()
        .find(|span| span.name == "invoke_agent agentic")
        .unwrap();
    assert_eq!(prompt.trace_id, trace_id);
    assert_eq!(prompt.parent, request.span_id);
    assert_eq!(
        prompt.text("agentic.prompt.id"),
        started["promptId"].as_str()
    );
    server.kill().unwrap();
    server.wait().unwrap();
}

/// Without an endpoint nothing is exported and nothing is said about it; with a protocol
/// agentic does not speak, the command still runs and says why traces are off.
#[test]
fn traces_are_off_without_an_endpoint_and_a_bad_protocol_is_named() {
    let turns = script("untraced", "- text: Fine.\n");
    let output = agentic(&["prompt", "Hi"], Some(&turns), None);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert!(
        !text(&output.stderr).contains("traces"),
        "{}",
        text(&output.stderr)
    );
    let output = command(&["prompt", "Hi"], Some(&turns))
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "carrier-pigeon")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert_eq!(text(&output.stdout).trim(), "Fine.");
    assert!(
        text(&output.stderr).contains("traces are off")
            && text(&output.stderr).contains("carrier-pigeon"),
        "{}",
        text(&output.stderr)
    );
}
