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
use support::{
    Script, agentic, command, conversation_id, database_url, scratch, script, serve_with, text,
};

/// One exported span, flattened: its ids, name, attributes, and its resource's attributes.
#[derive(Debug, Clone)]
struct Span {
    trace_id: String,
    span_id: String,
    parent: String,
    name: String,
    attributes: HashMap<String, AnyValue>,
    resource: HashMap<String, AnyValue>,
    /// The status's description (empty unless the span failed).
    status: String,
}

impl Span {
    fn text(&self, key: &str) -> Option<&str> {
        match self.attributes.get(key) {
            Some(AnyValue::StringValue(value)) => Some(value),
            _ => None,
        }
    }

    fn strings(&self, key: &str) -> Option<Vec<String>> {
        match self.attributes.get(key) {
            Some(AnyValue::ArrayValue(array)) => array
                .values
                .iter()
                .map(|value| match &value.value {
                    Some(AnyValue::StringValue(text)) => Some(text.clone()),
                    _ => None,
                })
                .collect(),
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
                    status: span
                        .status
                        .as_ref()
                        .map(|status| status.message.clone())
                        .unwrap_or_default(),
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

/// The first span whose name `matches`; a failure lists the names there are.
fn span_where(spans: &[Span], matches: impl Fn(&str) -> bool) -> &Span {
    spans
        .iter()
        .find(|span| matches(&span.name))
        .unwrap_or_else(|| panic!("no such span in {:?}", names(spans)))
}

/// `GET url` as `user`, as JSON.
async fn get_json(client: &reqwest::Client, url: &str, user: &str) -> serde_json::Value {
    client
        .get(url)
        .header("x-user-id", user)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
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

    let prompt = span_where(&spans, |name| name == "invoke_agent agentic");
    assert_eq!(prompt.parent, "", "the prompt of a CLI run is a root span");
    assert_eq!(prompt.text("gen_ai.operation.name"), Some("invoke_agent"));
    assert_eq!(prompt.text("agentic.mode"), Some("code"));
    assert_eq!(prompt.text("agentic.prompt.state"), Some("completed"));
    assert_eq!(prompt.text("gen_ai.provider.name"), Some("script"));
    assert_eq!(prompt.text("gen_ai.request.model"), Some("script-normal"));
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
    assert_eq!(
        chat.strings("gen_ai.response.finish_reasons"),
        Some(vec!["stop".to_owned()]),
        "{chat:?}"
    );
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
    let prompt = span_where(&spans, |name| name == "invoke_agent agentic");
    assert_eq!(
        prompt.text("agentic.prompt.input"),
        Some("Which zones, with payloads?")
    );
    assert_eq!(prompt.text("agentic.prompt.answer"), Some("Zones: UTC 2"));
    let chat = span_where(&spans, |name| name.starts_with("chat "));
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
    let execution = span_where(&spans, |name| name == "execute_code");
    assert!(
        execution
            .text("agentic.code")
            .is_some_and(|code| code.contains("timeNow"))
    );
    let tool = span_where(&spans, |name| name == "execute_tool time.now");
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
    let prompt = span_where(&spans, |name| name == "invoke_agent agentic");
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

/// The samples of a Prometheus text scrape, by metric name and labels.
struct Scrape(Vec<prometheus_parse::Sample>);

impl Scrape {
    fn parse(body: &str) -> Self {
        let lines = body.lines().map(|line| Ok(line.to_owned()));
        let parsed = prometheus_parse::Scrape::parse(lines).unwrap();
        Self(parsed.samples)
    }

    /// The value of the sample named `metric` whose labels include `labels`.
    fn value(&self, metric: &str, labels: &[(&str, &str)]) -> Option<f64> {
        self.0
            .iter()
            .find(|sample| {
                sample.metric == metric
                    && labels
                        .iter()
                        .all(|(name, value)| sample.labels.get(name) == Some(*value))
            })
            .map(|sample| match &sample.value {
                prometheus_parse::Value::Counter(value)
                | prometheus_parse::Value::Gauge(value)
                | prometheus_parse::Value::Untyped(value) => *value,
                prometheus_parse::Value::Histogram(buckets) => {
                    buckets.last().map_or(f64::NAN, |bucket| bucket.count)
                }
                prometheus_parse::Value::Summary(_) => f64::NAN,
            })
    }

    fn label_values(&self, metric: &str, label: &str) -> Vec<String> {
        self.0
            .iter()
            .filter(|sample| sample.metric == metric)
            .filter_map(|sample| sample.labels.get(label).map(str::to_owned))
            .collect()
    }
}

/// Waits until the prompt rests and returns it.
async fn finished_prompt(
    client: &reqwest::Client,
    url: &str,
    user: &str,
    id: &str,
) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let prompt = get_json(client, &format!("{url}/api/prompts/{id}"), user).await;
        let state = prompt["state"].as_str().unwrap_or_default().to_owned();
        if state != "running" || Instant::now() > deadline {
            return prompt;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `/metrics` is off without `AGENTIC_METRICS_TOKEN`, refuses any other token, and counts
/// what the server did: prompts by mode and state, model calls with their tokens and cost,
/// tool calls with their errors (a made-up tool name is not a label), sandbox workers and a
/// script stopped at the memory limit, the clients following events, and database writes.
#[test]
fn metrics_count_prompts_calls_workers_clients_and_writes() {
    let runtime = runtime();
    let turns = script(
        "metrics",
        "- code: |\n    const here = timeNow({ timezone: \"UTC\" });\n    const results = parallel([{ tool: \"time.now\", input: { timezone: \"Mars/Olympus\" } }, { tool: \"no.such-tool\", input: {} }]);\n    done(\"Done: \" + results.length);\n  usage: { input: 1000, output: 200 }\n- code: |\n    const all = []; for (let i = 0; i < 40; i++) { all.push(\"x\".repeat(10000000) + i); } output(\"kept \" + all.length);\n- code: done(\"That was too big.\")\n",
    );
    let config = priced_config();
    let (mut off, off_url, _) = serve_with(&turns, &database_url(), &[], &[]);
    let (mut server, url, log) = serve_with(
        &turns,
        &database_url(),
        &["--config", config.to_str().unwrap()],
        &[("AGENTIC_METRICS_TOKEN", "scrape-me")],
    );
    let client = reqwest::Client::new();
    let scrape = runtime.block_on(async {
        let status = client
            .get(format!("{off_url}/metrics"))
            .send()
            .await
            .unwrap()
            .status();
        assert_eq!(status, 404);
        for token in [None, Some("Bearer wrong"), Some("scrape-me")] {
            let mut request = client.get(format!("{url}/metrics"));
            if let Some(token) = token {
                request = request.header("authorization", token);
            }
            assert_eq!(request.send().await.unwrap().status(), 401, "{token:?}");
        }
        // Before anyone follows the events, the gauge is there at 0.
        let before = client
            .get(format!("{url}/metrics"))
            .header("authorization", "Bearer scrape-me")
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert_eq!(
            Scrape::parse(&before).value("agentic_sse_clients", &[]),
            Some(0.0),
            "{before}"
        );
        // A client follows the events throughout.
        let events = client
            .get(format!("{url}/api/events/stream"))
            .header("x-user-id", "metered")
            .send()
            .await
            .unwrap();
        assert_eq!(events.status(), 200);
        for input in ["What time is it?", "Fill the memory"] {
            let started: serde_json::Value = client
                .post(format!("{url}/api/prompt"))
                .header("x-user-id", "metered")
                .json(&serde_json::json!({ "input": input, "mode": "code" }))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            let id = started["promptId"].as_str().unwrap();
            let prompt = finished_prompt(&client, &url, "metered", id).await;
            assert_eq!(
                prompt["state"],
                "completed",
                "{prompt}\n{}",
                log.lock().unwrap()
            );
        }
        // The server's prices reach the API's conversations, listed and fetched.
        let listed = get_json(&client, &format!("{url}/api/conversations"), "metered").await;
        let first = listed
            .as_array()
            .unwrap()
            .iter()
            .find(|conversation| conversation["usage"]["inputTokens"] == 1000)
            .unwrap_or_else(|| panic!("no conversation with the first prompt's usage: {listed}"));
        let cost = first["usage"]["cost"].as_f64().unwrap();
        assert!((cost - 0.0045).abs() < 1e-12, "{first}");
        let conversation = first["id"].as_str().unwrap();
        let fetched = get_json(
            &client,
            &format!("{url}/api/conversations/{conversation}"),
            "metered",
        )
        .await;
        assert_eq!(fetched["usage"], first["usage"], "{fetched}");
        let response = client
            .get(format!("{url}/metrics"))
            .header("authorization", "Bearer scrape-me")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        assert!(
            response.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/plain; version=0.0.4")
        );
        let body = response.text().await.unwrap();
        drop(events);
        body
    });
    let metrics = Scrape::parse(&scrape);
    let value = |metric: &str, labels: &[(&str, &str)]| {
        metrics
            .value(metric, labels)
            .unwrap_or_else(|| panic!("no {metric} {labels:?} in\n{scrape}"))
    };
    assert_eq!(
        value(
            "agentic_prompts_total",
            &[("mode", "code"), ("state", "completed")]
        ),
        2.0
    );
    assert_eq!(value("agentic_prompts_running", &[("mode", "code")]), 0.0);
    let model = [("model", "script-normal")];
    assert_eq!(
        value("agentic_model_call_duration_seconds_count", &model),
        3.0
    );
    // 1,000 and 200 reported by the first turn; the scripted model counts the other two.
    assert!(
        value(
            "agentic_model_tokens_total",
            &[("model", "script-normal"), ("type", "input")]
        ) > 1000.0
    );
    assert!(
        value(
            "agentic_model_tokens_total",
            &[("model", "script-normal"), ("type", "output")]
        ) > 200.0
    );
    // 1,000 input tokens at 2.5 and 200 output tokens at 10 per million, at least.
    assert!(
        value(
            "agentic_model_cost",
            &[("model", "script-normal"), ("type", "input")]
        ) >= 0.0025,
        "{scrape}"
    );
    assert!(
        value(
            "agentic_model_cost",
            &[("model", "script-normal"), ("type", "output")]
        ) >= 0.002,
        "{scrape}"
    );
    assert_eq!(
        value(
            "agentic_tool_call_duration_seconds_count",
            &[("tool", "time.now")]
        ),
        2.0
    );
    assert_eq!(
        value("agentic_tool_call_errors_total", &[("tool", "time.now")]),
        1.0
    );
    assert_eq!(
        value("agentic_tool_call_errors_total", &[("tool", "(unknown)")]),
        1.0
    );
    assert!(
        !metrics
            .label_values("agentic_tool_call_duration_seconds_count", "tool")
            .iter()
            .any(|tool| tool.contains("no.such")),
        "{scrape}"
    );
    assert_eq!(
        value("agentic_sandbox_kills_total", &[("limit", "memory")]),
        1.0
    );
    assert!(value("agentic_sandbox_workers", &[]) >= 1.0, "{scrape}");
    assert_eq!(value("agentic_sandbox_scripts_running", &[]), 0.0);
    assert_eq!(value("agentic_sse_clients", &[]), 1.0);
    assert!(
        value(
            "agentic_db_write_duration_seconds_count",
            &[("backend", "sqlite")]
        ) > 0.0
    );
    assert!(
        scrape.contains("# HELP agentic_model_call_duration_seconds"),
        "{scrape}"
    );
    server.kill().unwrap();
    server.wait().unwrap();
    off.kill().unwrap();
    off.wait().unwrap();
}

/// `[prices]` turns each model call's tokens into a cost: on the prompt (`usage.cost`), summed
/// over a conversation's prompts, and in `agentic conversations`. A model without a price has
/// no cost (`-`), not a cost of 0.
#[test]
fn prices_give_prompts_and_conversations_a_cost() {
    let turns = script(
        "priced",
        "- text: One.\n  usage: { input: 1000, output: 200 }\n",
    );
    // Each run of the binary reads its script from the start.
    let next_turns = script(
        "priced-next",
        "- text: Two.\n  usage: { input: 3000, output: 100 }\n",
    );
    let config = priced_config();
    let config = config.to_str().unwrap();
    let first = command(
        &["--config", config, "prompt", "Count", "--json"],
        Some(&turns),
    )
    .output()
    .unwrap();
    assert_eq!(first.status.code(), Some(0), "{}", text(&first.stderr));
    let completed: serde_json::Value = text(&first.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .find(|event| event["type"] == "prompt.completed")
        .unwrap_or_else(|| panic!("no prompt.completed in {}", text(&first.stdout)));
    let cost = completed["data"]["usage"]["cost"].as_f64();
    assert!(
        cost.is_some_and(|cost| (cost - 0.0045).abs() < 1e-12),
        "{completed}"
    );
    let id = conversation_id(&text(&first.stderr));
    let second = command(
        &["--config", config, "prompt", "Again", "-c", &id],
        Some(&next_turns),
    )
    .output()
    .unwrap();
    assert_eq!(second.status.code(), Some(0), "{}", text(&second.stderr));
    // 0.0045 + (3,000 × 2.5 + 100 × 10) / 1e6 = 0.0045 + 0.0085.
    let listed = agentic(&["conversations"], None, None);
    let line = text(&listed.stdout)
        .lines()
        .find(|line| line.starts_with(&id))
        .unwrap_or_else(|| panic!("{id} not in {}", text(&listed.stdout)))
        .to_owned();
    assert!(line.contains("  4300 tokens  cost    0.0130  "), "{line}");

    let unpriced = script(
        "unpriced",
        "- text: Free.\n  usage: { input: 10, output: 1 }\n",
    );
    let free = agentic(&["prompt", "Free?"], Some(&unpriced), None);
    assert_eq!(free.status.code(), Some(0), "{}", text(&free.stderr));
    let free_id = conversation_id(&text(&free.stderr));
    let listed = agentic(&["conversations"], None, None);
    let line = text(&listed.stdout)
        .lines()
        .find(|line| line.starts_with(&free_id))
        .unwrap()
        .to_owned();
    assert!(line.contains("    11 tokens  cost         -  "), "{line}");
}

/// The README's price table is a valid `agentic.toml`.
#[test]
fn the_readme_price_table_is_a_valid_agentic_toml() {
    let readme = include_str!("../../../README.md");
    let example = readme
        .split("**Cost**")
        .nth(1)
        .and_then(|section| section.split("```toml").nth(1))
        .and_then(|block| block.split("```").next())
        .expect("README's Operating section has a price table");
    let file = scratch().join("readme-prices.toml");
    std::fs::write(&file, example).unwrap();
    let turns = script("readme-prices", "- text: unused\n");
    let output = agentic(
        &["--config", file.to_str().unwrap(), "capabilities"],
        Some(&turns),
        None,
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    std::fs::write(&file, "[prices.m]\ninput = -1\noutput = 1\n").unwrap();
    let output = agentic(
        &["--config", file.to_str().unwrap(), "capabilities"],
        Some(&turns),
        None,
    );
    assert_eq!(output.status.code(), Some(1));
    assert!(
        text(&output.stderr).contains("price"),
        "{}",
        text(&output.stderr)
    );
}

/// With payloads off, a failed span's status names the kind of error and quotes nothing: not
/// the path a failed `fs.read` was given, not what a script threw.
#[test]
fn failed_spans_quote_no_payload_in_their_status() {
    let runtime = runtime();
    let (endpoint, received) = runtime.block_on(http_receiver());
    let turns = script(
        "failing-spans",
        "- code: |\n    try { fsRead({ path: \"secret-plans-7311.txt\" }); } catch (error) { log(\"no plans\"); }\n    throw new Error(\"the launch code is 7311\");\n- code: done(\"gave up\")\n",
    );
    let output = command(&["prompt", "Read the plans", "-m", "code"], Some(&turns))
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)
        .env_remove("OTEL_EXPORTER_OTLP_PROTOCOL")
        .env_remove("AGENTIC_TRACE_PAYLOADS")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let spans = received.lock().unwrap().clone();
    let read = span_where(&spans, |name| name == "execute_tool fs.read");
    assert_eq!(read.text("error.type"), Some("tool_error"), "{read:?}");
    assert_eq!(read.status, "tool_error", "{read:?}");
    let execution = spans
        .iter()
        .find(|span| span.name == "execute_code" && !span.status.is_empty())
        .unwrap_or_else(|| panic!("no failed execution in {spans:?}"));
    assert!(
        execution
            .text("error.type")
            .is_some_and(|kind| !kind.is_empty()),
        "{execution:?}"
    );
    assert_eq!(
        execution.text("error.type"),
        Some(execution.status.as_str())
    );
    for span in &spans {
        assert!(
            !span.status.contains("7311"),
            "a payload in a status: {span:?}"
        );
    }
}

/// A one-shot command whose collector is down, or accepts and never answers, still does its
/// work and says once that its traces were not sent: no retries, no lines of the exporter's
/// own.
#[test]
fn a_collector_down_or_silent_costs_one_line() {
    let runtime = runtime();
    // Accepts connections and never answers; they stay open until the test ends.
    let silent = runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                held.push(socket);
            }
        });
        format!("http://{address}")
    });
    // A port nothing listens on: bound, then closed.
    let down = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let turns = script("collector-gone", "- text: Still here.\n");
    for endpoint in [&down, &silent] {
        let output = command(&["prompt", "Hi"], Some(&turns))
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
            .env_remove("OTEL_EXPORTER_OTLP_PROTOCOL")
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
        assert_eq!(text(&output.stdout).trim(), "Still here.");
        let stderr = text(&output.stderr);
        let said: Vec<&str> = stderr
            .lines()
            .filter(|line| !line.starts_with("agentic: conversation "))
            .collect();
        assert_eq!(said.len(), 1, "{endpoint}: {stderr}");
        assert!(
            said[0].starts_with("agentic: traces were not all sent: "),
            "{endpoint}: {stderr}"
        );
    }
}

/// Each key of a JSON object once, at every depth.
struct UniqueKeys;

impl<'de> serde::Deserialize<'de> for UniqueKeys {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(UniqueKeysVisitor)
    }
}

struct UniqueKeysVisitor;

impl<'de> serde::de::Visitor<'de> for UniqueKeysVisitor {
    type Value = UniqueKeys;

    fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
        formatter.write_str("JSON")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<UniqueKeys, A::Error> {
        let mut seen = std::collections::HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key.clone()) {
                return Err(serde::de::Error::custom(format!("duplicate key {key}")));
            }
            map.next_value::<UniqueKeys>()?;
        }
        Ok(UniqueKeys)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<UniqueKeys, A::Error> {
        while seq.next_element::<UniqueKeys>()?.is_some() {}
        Ok(UniqueKeys)
    }

    fn visit_bool<E>(self, _: bool) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }
    fn visit_i64<E>(self, _: i64) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }
    fn visit_u64<E>(self, _: u64) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }
    fn visit_f64<E>(self, _: f64) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }
    fn visit_str<E>(self, _: &str) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }
    fn visit_unit<E>(self) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }
}

/// Every line as a JSON object with unique keys; a failure names the line.
fn json_lines(log: &str) -> Vec<serde_json::Value> {
    log.lines()
        .map(|line| {
            serde_json::from_str::<UniqueKeys>(line)
                .unwrap_or_else(|error| panic!("not a strict JSON line ({error}): {line}"));
            let value: serde_json::Value = serde_json::from_str(line).unwrap();
            assert!(value.is_object(), "{line}");
            value
        })
        .collect()
}

/// With `--log-format json`, everything `agentic serve` writes on stderr is a JSON object
/// with unique keys, from the bad filter it was given to "stopped"; a client's error shows its
/// code in the request's line; and a server that cannot start says why in JSON too.
#[test]
fn json_logs_are_json_from_start_to_stop() {
    let runtime = runtime();
    let turns = script("json-logs", "- text: Logged.\n");
    let mut server = command(
        &["--log-format", "json", "serve", "--addr", "127.0.0.1:0"],
        Some(&turns),
    )
    .env("AGENTIC_LOG", "info,agentic_api=loudly")
    .stdin(std::process::Stdio::null())
    .spawn()
    .unwrap();
    let stderr = server.stderr.take().unwrap();
    let (lines_sender, lines_receiver) = std::sync::mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufRead::lines(std::io::BufReader::new(stderr)) {
            let Ok(line) = line else { break };
            if lines_sender.send(line).is_err() {
                break;
            }
        }
    });
    let mut log = String::new();
    let url = loop {
        let line = lines_receiver
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("the server never named its address: {log}"));
        log.push_str(&line);
        log.push('\n');
        if let Some(word) = line
            .split(|c: char| c.is_whitespace() || c == '"')
            .find(|word| word.starts_with("http://"))
        {
            break word.to_owned();
        }
    };
    let (status, body) = runtime.block_on(async {
        let response = reqwest::Client::new()
            .get(format!("{url}/api/prompts/no-such-prompt"))
            .header("x-user-id", "logged")
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json::<serde_json::Value>().await.unwrap())
    });
    assert!((400..500).contains(&status), "{status} {body}");
    let code = body["error"]["code"].as_str().unwrap().to_owned();
    let pid = server.id().to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(killed.success());
    assert!(server.wait().unwrap().success());
    reader.join().unwrap();
    log.extend(lines_receiver.try_iter().map(|line| line + "\n"));
    let lines = json_lines(&log);
    let said = |level: &str, words: &str| {
        lines.iter().any(|line| {
            line["level"] == level
                && line["message"]
                    .as_str()
                    .is_some_and(|message| message.contains(words))
        })
    };
    assert!(said("WARN", "agentic_api=loudly"), "{log}");
    assert!(said("INFO", "listening on http://"), "{log}");
    assert!(said("INFO", "stopped"), "{log}");
    let refused = lines
        .iter()
        .find(|line| line["span"]["http.route"] == "/api/prompts/{id}")
        .unwrap_or_else(|| panic!("no request line in {log}"));
    assert_eq!(refused["status"], status, "{refused}");
    assert_eq!(refused["error.code"], code.as_str(), "{refused}");

    // `agentic mcp serve --http` names its address as JSON too.
    let mut mcp = command(
        &[
            "--log-format",
            "json",
            "mcp",
            "serve",
            "--http",
            "127.0.0.1:0",
        ],
        Some(&turns),
    )
    .stdin(std::process::Stdio::null())
    .spawn()
    .unwrap();
    let mut first = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(mcp.stderr.take().unwrap()),
        &mut first,
    )
    .unwrap();
    mcp.kill().unwrap();
    mcp.wait().unwrap();
    let named = &json_lines(&first)[0];
    assert!(
        named["message"]
            .as_str()
            .is_some_and(|message| message.starts_with("MCP at http://127.0.0.1:")),
        "{first}"
    );

    // The port is taken: the server cannot start, and says so as JSON.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = taken.local_addr().unwrap().to_string();
    let output = command(
        &["--log-format", "json", "serve", "--addr", &address],
        Some(&turns),
    )
    .output()
    .unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
    let lines = json_lines(&text(&output.stderr));
    assert!(
        lines.iter().any(|line| line["level"] == "ERROR"
            && line["message"]
                .as_str()
                .is_some_and(|message| message.contains(&address))),
        "{}",
        text(&output.stderr)
    );
}
