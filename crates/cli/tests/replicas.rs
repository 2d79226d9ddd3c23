#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Several `agentic serve` processes on one PostgreSQL: events published by one reach clients
//! of another, in one order, and a client resumes on another server with `Last-Event-ID`.
//! Needs `AGENTIC_TEST_POSTGRES_URL` (`.ci/run` starts the server and sets it, with
//! `AGENTIC_REQUIRE_POSTGRES`); skipped without it.

mod support;

use std::time::{Duration, Instant};

use agentic_conversation::sea_orm::{ConnectionTrait as _, Database};
use agentic_testing::Requirement;
use futures::StreamExt as _;
use serde_json::{Value, json};
use support::{script, serve_with, start_prompt, wait_for_state, wait_until};

/// A fresh database on the test server, or `None` when there is no server to use.
async fn fresh_database() -> Option<String> {
    let Ok(admin) = std::env::var("AGENTIC_TEST_POSTGRES_URL") else {
        Requirement::Postgres.missing("AGENTIC_TEST_POSTGRES_URL is unset (bash .ci/postgres.sh)");
        return None;
    };
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let name = format!(
        "agentic_replicas_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
    );
    let connection = Database::connect(&admin).await.unwrap();
    connection
        .execute_unprepared(&format!("DROP DATABASE IF EXISTS {name}"))
        .await
        .unwrap();
    connection
        .execute_unprepared(&format!("CREATE DATABASE {name}"))
        .await
        .unwrap();
    let (base, _) = admin.rsplit_once('/').unwrap();
    Some(format!("{base}/{name}"))
}

/// Reads `(id, event, data)` from an event stream up to and including `prompt.completed`.
async fn read_prompt(response: reqwest::Response) -> Vec<(u64, String, Value)> {
    let mut stream = eventsource_stream::EventStream::new(response.bytes_stream());
    let mut events = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let next = tokio::time::timeout_at(deadline, stream.next())
            .await
            .unwrap_or_else(|_| panic!("no prompt.completed within 30 s: {events:?}"))
            .expect("the stream ended");
        let event = next.unwrap();
        let done = event.event == "prompt.completed";
        events.push((
            event.id.parse().unwrap_or_default(),
            event.event,
            serde_json::from_str(&event.data).unwrap_or(Value::Null),
        ));
        if done {
            return events;
        }
    }
}

/// Waits until alice's prompt waits for approval (read through `url`), then approves its
/// call of `function` there.
async fn approve_when_waiting(client: &reqwest::Client, url: &str, prompt: &str, function: &str) {
    let waiting = wait_for_state(client, url, prompt, "waiting_for_approval").await;
    // The call of `function` waits, or (code mode) the program's plan holding it.
    let call = waiting["output"]
        .as_array()
        .unwrap()
        .iter()
        .find(|output| {
            output["result"]["awaitingApproval"] == true
                && (output["function"] == function
                    || output["input"]["calls"][0]["tool"] == function)
        })
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let approved = client
        .post(format!("{url}/api/prompts/{prompt}/approve"))
        .header("x-user-id", "alice")
        .json(&json!({ "toolCallId": call }))
        .send()
        .await
        .unwrap();
    assert_eq!(approved.status(), 202);
}

/// Removes a database [`fresh_database`] made.
async fn drop_database(database: &str) {
    let admin = std::env::var("AGENTIC_TEST_POSTGRES_URL").unwrap();
    let name = database.rsplit('/').next().unwrap();
    let connection = Database::connect(&admin).await.unwrap();
    let _ = connection
        .execute_unprepared(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        .await;
}

#[test]
fn servers_on_one_postgres_share_events_and_stop_cleanly() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let Some(database) = runtime.block_on(fresh_database()) else {
        return;
    };
    let turns = script(
        "replicas",
        "- { text: \"Answered on A, streamed to B.\", delayMs: 300 }\n\
         - code: |\n    fs.write({ path: \"approved.txt\", content: \"once\" });\n    done(\"Saved.\");\n",
    );
    let files = support::scratch().join("replica-files");
    let _ = std::fs::remove_dir_all(&files);
    let config = support::scratch().join("replicas.toml");
    std::fs::write(
        &config,
        format!("[fs]\nroot = \"{}\"\nperUser = true\n", files.display()),
    )
    .unwrap();
    let options = ["--config", config.to_str().unwrap()];
    let (mut a, url_a, log_a) = serve_with(&turns, &database, &options, &[]);
    let (mut b, url_b, log_b) = serve_with(&turns, &database, &options, &[]);
    let client = reqwest::Client::new();
    runtime.block_on(async {
        // A client of B follows alice; the prompt runs on A.
        let following = client
            .get(format!("{url_b}/api/events/stream"))
            .header("x-user-id", "alice")
            .send()
            .await
            .unwrap();
        assert_eq!(following.status(), 200);
        let reading = tokio::spawn(read_prompt(following));
        tokio::time::sleep(Duration::from_millis(200)).await;
        let prompt = start_prompt(&client, &url_a, json!({ "input": "Hello?" })).await;
        let on_b = reading.await.unwrap();
        let names: Vec<&str> = on_b.iter().map(|(_, name, _)| name.as_str()).collect();
        assert_eq!(names.first(), Some(&"prompt.created"), "{names:?}");
        assert!(names.contains(&"prompt.stream"), "{names:?}");
        assert!(
            on_b.iter()
                .all(|(_, _, data)| data["data"]["promptId"] == prompt.as_str()),
            "{on_b:?}"
        );
        let ids: Vec<u64> = on_b.iter().map(|(id, _, _)| *id).collect();
        assert!(ids.windows(2).all(|pair| pair[0] < pair[1]), "{ids:?}");

        // Resumed on A after the third: the rest, once each, with the same ids.
        let resumed = client
            .get(format!("{url_a}/api/events/stream"))
            .header("x-user-id", "alice")
            .header("last-event-id", ids[2].to_string())
            .send()
            .await
            .unwrap();
        let again = read_prompt(resumed).await;
        let again_ids: Vec<u64> = again.iter().map(|(id, _, _)| *id).collect();
        assert_eq!(again_ids, ids[3..].to_vec());

        // A code-mode script paused for approval on A, approved on B: it goes on on A.
        let prompt = start_prompt(
            &client,
            &url_a,
            json!({ "input": "Save it", "mode": "code" }),
        )
        .await;
        approve_when_waiting(&client, &url_b, &prompt, "fs.write").await;
        let done = wait_for_state(&client, &url_b, &prompt, "completed").await;
        let writes = done["output"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|output| output["function"] == "fs.write")
            .count();
        assert_eq!(writes, 1, "{done}");
        assert_eq!(
            done["output"].as_array().unwrap().last().unwrap()["content"],
            "Saved."
        );
    });
    // Both stop on SIGTERM, promptly (the relay lets go of the database first).
    for (server, log) in [(&mut a, &log_a), (&mut b, &log_b)] {
        let started = Instant::now();
        terminate(server.id());
        loop {
            if server.try_wait().unwrap().is_some() {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(15),
                "a server did not stop:\n{}",
                log.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        // Its last words arrive through the reader thread a moment later.
        let deadline = Instant::now() + Duration::from_secs(5);
        while !log.lock().unwrap().contains("agentic: stopped") {
            assert!(Instant::now() < deadline, "{}", log.lock().unwrap());
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    runtime.block_on(drop_database(&database));
}

/// SIGTERM, as a service manager stops a server.
fn terminate(pid: u32) {
    let status = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn a_dead_servers_running_prompts_are_taken_over() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let Some(database) = runtime.block_on(fresh_database()) else {
        return;
    };
    let config = support::scratch().join("takeover.toml");
    std::fs::write(&config, "[shell]\nallow = [\"sleep\"]\n").unwrap();
    let options = ["--config", config.to_str().unwrap()];
    // A's model never answers in time; then A runs a long command. B answers what it takes.
    let slow = script(
        "takeover-a",
        "- { text: \"never arrives\", delayMs: 60000 }\n",
    );
    let long_call = script(
        "takeover-a2",
        "- toolCalls:\n    - { id: call_sleep, name: shell.exec, input: { command: \"sleep 30\" } }\n",
    );
    let answers = script(
        "takeover-b",
        "- text: \"Taken over and answered.\"\n- text: \"Recovered after the interrupted call.\"\n",
    );
    let (mut b, url_b, log_b) = serve_with(&answers, &database, &options, &[]);
    let client = reqwest::Client::new();
    for (turns, input, expected) in [
        (&slow, "Take your time", "Taken over and answered."),
        (
            &long_call,
            "Sleep a while",
            "Recovered after the interrupted call.",
        ),
    ] {
        let (mut a, url_a, _) = serve_with(turns, &database, &options, &[]);
        runtime.block_on(async {
            let prompt = start_prompt(&client, &url_a, json!({ "input": input })).await;
            // Mid-round: the model thinking, or the command running.
            wait_until(&client, &url_b, &prompt, "never mid-round", |stored| {
                let calling = stored["output"]
                    .as_array()
                    .is_some_and(|outputs| !outputs.is_empty());
                stored["state"] == "running" && (input != "Sleep a while" || calling)
            })
            .await;
            tokio::time::sleep(Duration::from_millis(300)).await;
            a.kill().unwrap();
            a.wait().unwrap();
            let killed = Instant::now();
            let done = wait_for_state(&client, &url_b, &prompt, "completed").await;
            let took = killed.elapsed();
            // Measured, not a bound: within 2 s here (a killed process on this host is found
            // dead at once; the takeover loop looks every 2 s).
            println!("taken over and completed {took:?} after the kill");
            let outputs = done["output"].as_array().unwrap();
            assert_eq!(outputs.last().unwrap()["content"], expected, "{done}");
            if input == "Sleep a while" {
                let call = &outputs[0];
                assert_eq!(call["function"], "shell.exec");
                let error = call["result"]["error"].as_str().unwrap_or_default();
                assert!(error.contains("not run again"), "{done}");
            }
            // Nothing left running or pending anywhere in it.
            assert!(
                !done.to_string().contains("\"pending\""),
                "{done}\n{}",
                log_b.lock().unwrap()
            );
        });
    }
    terminate(b.id());
    let _ = b.wait();
    runtime.block_on(drop_database(&database));
}

/// Reads `(id, event, data)` from an event stream into `into` until every prompt in `prompts`
/// has completed, or the stream ends (its server died).
async fn follow(
    response: reqwest::Response,
    into: std::sync::Arc<std::sync::Mutex<Vec<(u64, String, Value)>>>,
    prompts: Vec<String>,
) {
    let mut stream = eventsource_stream::EventStream::new(response.bytes_stream());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while let Ok(Some(Ok(event))) = tokio::time::timeout_at(deadline, stream.next()).await {
        let data: Value = serde_json::from_str(&event.data).unwrap_or(Value::Null);
        let mut events = into.lock().unwrap();
        events.push((event.id.parse().unwrap_or_default(), event.event, data));
        let completed = |prompt: &String| {
            events.iter().any(|(_, name, data)| {
                name == "prompt.completed" && data["data"]["promptId"] == prompt.as_str()
            })
        };
        if prompts.iter().all(completed) {
            return;
        }
    }
}

/// alice's event stream on `url`, from after `last` if given.
async fn stream_on(client: &reqwest::Client, url: &str, last: Option<u64>) -> reqwest::Response {
    let mut request = client
        .get(format!("{url}/api/events/stream"))
        .header("x-user-id", "alice");
    if let Some(last) = last {
        request = request.header("last-event-id", last.to_string());
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), 200);
    response
}

#[test]
fn three_servers_lose_nothing_when_one_is_killed_in_either_mode() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let Some(database) = runtime.block_on(fresh_database()) else {
        return;
    };
    let files = support::scratch().join("three-files");
    let _ = std::fs::remove_dir_all(&files);
    let config = support::scratch().join("three.toml");
    std::fs::write(
        &config,
        format!(
            "[fs]\nroot = \"{}\"\nperUser = true\n\n[shell]\nallow = [\"sleep\"]\n\n\
             [api]\nrequestsPerMinute = 100000\nburst = 10000\n",
            files.display()
        ),
    )
    .unwrap();
    let options = ["--config", config.to_str().unwrap()];
    // A: a script that waits for approval; then one that writes a todo, runs a long command
    // (killed there), and writes another; and a classic answer that never comes in time.
    let turns_a = script(
        "three-a",
        r#"
- code: |
    fs.write({ path: "approved.txt", content: "once" });
    done("Saved.");
- code: |
    todo.create({ title: "before the kill" });
    const token = Math.floor(Math.random() * 1e9);
    let slept;
    try { shell.exec({ command: "sleep 30" }); slept = "slept"; } catch (error) { slept = "interrupted"; }
    todo.create({ title: "after the kill " + token });
    done("Two todos; the command " + slept + "; token " + token);
- { text: "never arrives", delayMs: 60000 }
"#,
    );
    let turns_b = script("three-b", "- text: \"Answered by B.\"\n");
    let turns_c = script("three-c", "- text: \"Answered by C.\"\n");
    let (mut a, url_a, _) = serve_with(&turns_a, &database, &options, &[]);
    let (mut b, url_b, log_b) = serve_with(&turns_b, &database, &options, &[]);
    let (mut c, url_c, log_c) = serve_with(&turns_c, &database, &options, &[]);
    let client = reqwest::Client::new();
    runtime.block_on(async {
        // Paused on A, approved on C: the decision goes to A, where the script waits.
        let prompt =
            start_prompt(&client, &url_a, json!({ "input": "Save", "mode": "code" })).await;
        approve_when_waiting(&client, &url_c, &prompt, "fs.write").await;
        wait_for_state(&client, &url_b, &prompt, "completed").await;

        // Two clients follow alice: X on A (it will lose its server), Y on B.
        let seen_x = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen_y = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let on_a = stream_on(&client, &url_a, None).await;
        let on_b = stream_on(&client, &url_b, None).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        // A code prompt and a classic one run on A, in two conversations. The classic one
        // starts once the code one has its script: A's model answers in the order it is asked.
        let code = start_prompt(&client, &url_a, json!({ "input": "Todos", "mode": "code" })).await;
        wait_until(
            &client,
            &url_b,
            &code,
            "the command never started",
            |stored| {
                stored["output"].as_array().is_some_and(|outputs| {
                    outputs.iter().any(|output| {
                        output["function"] == "shell.exec" && output["result"]["type"] == "pending"
                    })
                })
            },
        )
        .await;
        let classic = start_prompt(&client, &url_a, json!({ "input": "Take your time" })).await;
        let both = vec![code.clone(), classic.clone()];
        let x = tokio::spawn(follow(on_a, seen_x.clone(), both.clone()));
        let y = tokio::spawn(follow(on_b, seen_y.clone(), both.clone()));
        wait_for_state(&client, &url_b, &classic, "running").await;
        tokio::time::sleep(Duration::from_millis(300)).await;

        a.kill().unwrap();
        a.wait().unwrap();
        let killed = Instant::now();
        // X's stream ends with its server; X reconnects to C and resumes after what it saw.
        x.await.unwrap();
        let last = seen_x.lock().unwrap().last().map(|(id, _, _)| *id);
        assert!(last.is_some(), "X saw nothing before the kill");
        let on_c = stream_on(&client, &url_c, last).await;
        follow(on_c, seen_x.clone(), both.clone()).await;
        y.await.unwrap();
        let took = killed.elapsed();
        println!("both prompts taken over and completed {took:?} after the kill");

        // No gap, no duplicate: X (A, then C) saw exactly what Y saw on B.
        let ids = |seen: &std::sync::Mutex<Vec<(u64, String, Value)>>| -> Vec<u64> {
            seen.lock().unwrap().iter().map(|(id, _, _)| *id).collect()
        };
        let (ids_x, ids_y) = (ids(&seen_x), ids(&seen_y));
        assert!(ids_y.windows(2).all(|pair| pair[0] < pair[1]), "{ids_y:?}");
        assert_eq!(ids_x, ids_y, "X after reconnecting to C, against Y on B");

        // The code prompt: its first todo was made once, the command was not run again, and
        // the script went on with the same random token.
        let done = wait_for_state(&client, &url_c, &code, "completed").await;
        let outputs = done["output"].as_array().unwrap();
        let creates: Vec<&Value> = outputs
            .iter()
            .filter(|output| output["function"] == "todo.create")
            .collect();
        assert_eq!(creates.len(), 2, "{done}");
        let shell = outputs
            .iter()
            .find(|output| output["function"] == "shell.exec")
            .unwrap();
        let error = shell["result"]["error"].as_str().unwrap_or_default();
        assert!(error.contains("not run again"), "{done}");
        let answer = outputs.last().unwrap()["content"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(
            answer.starts_with("Two todos; the command interrupted; token "),
            "{done}"
        );
        let token = answer.rsplit(' ').next().unwrap();
        let listed: Value = client
            .post(format!("{url_b}/api/tools/todo.list/invoke"))
            .header("x-user-id", "alice")
            .json(&json!({}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let titles: Vec<&str> = listed["output"]["todos"]
            .as_array()
            .unwrap()
            .iter()
            .map(|todo| todo["title"].as_str().unwrap())
            .collect();
        assert_eq!(
            titles,
            vec![
                "before the kill".to_owned(),
                format!("after the kill {token}")
            ],
            "{listed}"
        );
        // The classic prompt: the round in flight was asked again, on B or C.
        let done = wait_for_state(&client, &url_b, &classic, "completed").await;
        let answer = done["output"].as_array().unwrap().last().unwrap()["content"].clone();
        assert!(
            answer == "Answered by B." || answer == "Answered by C.",
            "{done}\n{}\n{}",
            log_b.lock().unwrap(),
            log_c.lock().unwrap()
        );
    });
    for server in [&mut b, &mut c] {
        terminate(server.id());
        let _ = server.wait();
    }
    runtime.block_on(drop_database(&database));
}

/// `cargo xtask bench takeover`: kills in turn a server running a code-mode script, one
/// waiting for its model, and one running a classic tool call, each time started as another
/// host (`AGENTIC_INSTANCE_HOST`), so only its lease (`AGENTIC_LEASE_SECONDS`, 4 by default)
/// tells the surviving server that it died. Measures the time from each kill to the prompt
/// completing on the survivor (`AGENTIC_KILLS` kills, 21 by default), and checks that no
/// committed output was lost and no tool call ran twice.
#[test]
#[ignore = "a benchmark: cargo xtask bench takeover"]
fn kills_in_mixed_modes_lose_nothing() {
    let kills: usize = std::env::var("AGENTIC_KILLS")
        .ok()
        .and_then(|kills| kills.parse().ok())
        .unwrap_or(21);
    let lease: u64 = std::env::var("AGENTIC_LEASE_SECONDS")
        .ok()
        .and_then(|lease| lease.parse().ok())
        .unwrap_or(4);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let Some(database) = runtime.block_on(fresh_database()) else {
        panic!("the takeover benchmark needs AGENTIC_TEST_POSTGRES_URL");
    };
    let config = support::scratch().join("kills.toml");
    std::fs::write(
        &config,
        format!(
            "[shell]\nallow = [\"sleep\"]\n\n[conversation]\nleaseSeconds = {lease}\n\n\
             [interpreter]\nautoApprove = true\n\n[api]\nrequestsPerMinute = 100000\nburst = 10000\n"
        ),
    )
    .unwrap();
    let options = ["--config", config.to_str().unwrap()];
    let survivor_turns = script(
        "kills-b",
        &"- text: \"Answered after the kill.\"\n".repeat(kills),
    );
    let (mut b, url_b, log_b) = serve_with(&survivor_turns, &database, &options, &[]);
    let client = reqwest::Client::new();
    let mut times = Vec::new();
    let (mut lost, mut twice) = (0, 0);
    for kill in 0..kills {
        let kind = ["code", "classic model", "classic tool"][kill % 3];
        let turns = match kind {
            "code" => format!(
                "- code: |\n    todo.create({{ title: \"kill {kill} before\" }});\n    \
                 try {{ shell.exec({{ command: \"sleep 30\" }}); }} catch (error) {{}}\n    \
                 todo.create({{ title: \"kill {kill} after\" }});\n    done(\"Done {kill}.\");\n"
            ),
            "classic model" => "- { text: \"never arrives\", delayMs: 60000 }\n".to_owned(),
            _ => "- toolCalls:\n    - { id: call_sleep, name: shell.exec, input: { command: \"sleep 30\" } }\n"
                .to_owned(),
        };
        let turns = script(&format!("kills-a{kill}"), &turns);
        let (mut a, url_a, _) = serve_with(
            &turns,
            &database,
            &options,
            &[("AGENTIC_INSTANCE_HOST", "another-host")],
        );
        runtime.block_on(async {
            let mode = if kind == "code" { "code" } else { "classic" };
            let prompt = start_prompt(
                &client,
                &url_a,
                json!({ "input": format!("Kill {kill}"), "mode": mode }),
            )
            .await;
            let before = wait_until(&client, &url_b, &prompt, "never mid-round", |stored| {
                let outputs = stored["output"].as_array().cloned().unwrap_or_default();
                let pending = |function: &str| {
                    outputs.iter().any(|output| {
                        output["function"] == function && output["result"]["type"] == "pending"
                    })
                };
                stored["state"] == "running"
                    && match kind {
                        "classic model" => true,
                        _ => pending("shell.exec"),
                    }
            })
            .await;
            tokio::time::sleep(Duration::from_millis(200)).await;
            a.kill().unwrap();
            a.wait().unwrap();
            let killed = Instant::now();
            let done = wait_for_state(&client, &url_b, &prompt, "completed").await;
            times.push(killed.elapsed().as_secs_f64());
            // Every output seen before the kill is still there, as it was or finished.
            let after = done["output"].as_array().unwrap();
            for output in before["output"].as_array().unwrap() {
                let kept = after.iter().any(|later| {
                    later["id"] == output["id"]
                        && later["input"] == output["input"]
                        && (output["result"]["type"] == "pending"
                            || later["result"] == output["result"])
                });
                if !kept {
                    lost += 1;
                }
            }
            // Each call once in the timeline; the command that was running not run again.
            for output in after {
                if output["function"] == "shell.exec"
                    && !output["result"]["error"]
                        .as_str()
                        .is_some_and(|error| error.contains("not run again"))
                {
                    twice += 1;
                }
            }
            if kind == "code" {
                let listed: Value = client
                    .post(format!("{url_b}/api/tools/todo.list/invoke"))
                    .header("x-user-id", "alice")
                    .json(&json!({ "status": "all" }))
                    .send()
                    .await
                    .unwrap()
                    .json()
                    .await
                    .unwrap();
                for title in [format!("kill {kill} before"), format!("kill {kill} after")] {
                    let made = listed["output"]["todos"]
                        .as_array()
                        .unwrap_or_else(|| panic!("todo.list: {listed}"))
                        .iter()
                        .filter(|todo| todo["title"] == title.as_str())
                        .count();
                    if made != 1 {
                        twice += 1;
                    }
                }
            }
        });
        eprintln!("kill {kill} ({kind}): completed {:.2} s after", times[kill]);
    }
    terminate(b.id());
    let _ = b.wait();
    runtime.block_on(drop_database(&database));
    let mut sorted = times.clone();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    let worst = sorted[sorted.len() - 1];
    println!(
        "{}",
        json!({
            "kills": kills, "leaseSeconds": lease, "medianSeconds": median, "worstSeconds": worst,
            "outputsLost": lost, "callsRunTwice": twice,
        })
    );
    assert_eq!((lost, twice), (0, 0), "{}", log_b.lock().unwrap());
    assert!(
        worst <= lease as f64 + 2.0,
        "a takeover took {worst:.2} s, over the lease ({lease} s) + 2 s"
    );
}

/// Five servers started at the same moment on an empty database all come up (they take turns
/// migrating it) and all answer.
#[test]
fn five_servers_started_together_on_an_empty_database_all_serve() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let Some(database) = runtime.block_on(fresh_database()) else {
        return;
    };
    let turns = script("five", "- text: \"Hello.\"\n");
    let starting: Vec<_> = (0..5)
        .map(|_| {
            let (turns, database) = (turns.0.clone(), database.clone());
            std::thread::spawn(move || serve_with(&support::Script(turns), &database, &[], &[]))
        })
        .collect();
    let mut servers: Vec<_> = starting
        .into_iter()
        .map(|started| started.join().expect("a server did not start"))
        .collect();
    let client = reqwest::Client::new();
    runtime.block_on(async {
        for (_, url, log) in &servers {
            let health = client
                .get(format!("{url}/api/health"))
                .send()
                .await
                .unwrap();
            assert_eq!(health.status(), 200, "{}", log.lock().unwrap());
        }
    });
    for (server, _, _) in &mut servers {
        terminate(server.id());
        let _ = server.wait();
    }
    runtime.block_on(drop_database(&database));
}

/// The config of the tests below: a short lease, and servers that each count as another host,
/// so a killed one is found dead only when its lease runs out.
fn lease_config(name: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let files = support::scratch().join(format!("{name}-files"));
    let _ = std::fs::remove_dir_all(&files);
    let config = support::scratch().join(format!("{name}.toml"));
    std::fs::write(
        &config,
        format!(
            "[fs]\nroot = \"{}\"\nperUser = true\n\n[conversation]\nleaseSeconds = 4\n\n\
             [api]\nrequestsPerMinute = 100000\nburst = 10000\n",
            files.display()
        ),
    )
    .unwrap();
    (config, files)
}

/// The owner of a waiting prompt is killed; another server, started after, is given the
/// approval while the dead one's lease still runs: 202, and the approval is not lost. It is
/// stored, the wake-up sent to the dead server goes nowhere, and once the lease runs out the
/// live server adopts the prompt and applies it, once.
#[test]
fn an_approval_sent_to_a_dead_owner_within_its_lease_is_applied_once() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let Some(database) = runtime.block_on(fresh_database()) else {
        return;
    };
    let (config, files) = lease_config("dead-owner");
    let options = ["--config", config.to_str().unwrap()];
    let turns = script(
        "dead-owner",
        "- code: |\n    fs.write({ path: \"approved.txt\", content: \"once\" });\n    \
         todo.create({ title: \"after the approval\" });\n    done(\"Saved.\");\n",
    );
    let (mut b, url_b, _) = serve_with(
        &turns,
        &database,
        &options,
        &[("AGENTIC_INSTANCE_HOST", "host-b")],
    );
    let client = reqwest::Client::new();
    let prompt = runtime.block_on(async {
        let prompt =
            start_prompt(&client, &url_b, json!({ "input": "Save", "mode": "code" })).await;
        wait_for_state(&client, &url_b, &prompt, "waiting_for_approval").await;
        prompt
    });
    b.kill().unwrap();
    b.wait().unwrap();
    let (mut a, url_a, log_a) = serve_with(
        &turns,
        &database,
        &options,
        &[("AGENTIC_INSTANCE_HOST", "host-a")],
    );
    runtime.block_on(async {
        approve_when_waiting(&client, &url_a, &prompt, "fs.write").await;
        let done = wait_for_state(&client, &url_a, &prompt, "completed").await;
        let writes = done["output"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|output| output["function"] == "fs.write")
            .count();
        assert_eq!(writes, 1, "{done}\n{}", log_a.lock().unwrap());
        let listed: Value = client
            .post(format!("{url_a}/api/tools/todo.list/invoke"))
            .header("x-user-id", "alice")
            .json(&json!({}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let made = listed["output"]["todos"]
            .as_array()
            .unwrap_or_else(|| panic!("todo.list: {listed}"))
            .iter()
            .filter(|todo| todo["title"] == "after the approval")
            .count();
        assert_eq!(made, 1, "{listed}");
    });
    assert_eq!(
        std::fs::read_to_string(files.join("alice/approved.txt")).unwrap(),
        "once"
    );
    terminate(a.id());
    let _ = a.wait();
    runtime.block_on(drop_database(&database));
}

/// A cancel given to a server other than the one running the prompt stops it there (200,
/// the prompt as it ended), and its conversation goes on; a cancel given while the owner is
/// dead but its lease still runs is stored, and the server that takes the prompt over ends
/// it instead of running it on.
#[test]
fn a_cancel_on_another_server_stops_the_prompt_even_when_its_owner_dies() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let Some(database) = runtime.block_on(fresh_database()) else {
        return;
    };
    let (config, _) = lease_config("remote-cancel");
    let options = ["--config", config.to_str().unwrap()];
    let turns_a = script(
        "remote-cancel-a",
        "- { text: \"never arrives\", delayMs: 60000 }\n\
         - { text: \"never arrives either\", delayMs: 60000 }\n",
    );
    let turns_c = script(
        "remote-cancel-c",
        "- text: \"Next prompt answered.\"\n\
         - { text: \"taken over, never arrives\", delayMs: 60000 }\n",
    );
    let (mut a, url_a, _) = serve_with(
        &turns_a,
        &database,
        &options,
        &[("AGENTIC_INSTANCE_HOST", "host-a")],
    );
    let (mut c, url_c, log_c) = serve_with(
        &turns_c,
        &database,
        &options,
        &[("AGENTIC_INSTANCE_HOST", "host-c")],
    );
    let client = reqwest::Client::new();
    runtime.block_on(async {
        // Running on A, cancelled on C.
        let started: Value = client
            .post(format!("{url_a}/api/prompt"))
            .header("x-user-id", "alice")
            .json(&json!({ "input": "Take your time" }))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let prompt = started["promptId"].as_str().unwrap().to_owned();
        let conversation = started["conversationId"].as_str().unwrap().to_owned();
        wait_for_state(&client, &url_c, &prompt, "running").await;
        let cancelled = client
            .post(format!("{url_c}/api/prompts/{prompt}/cancel"))
            .header("x-user-id", "alice")
            .send()
            .await
            .unwrap();
        assert_eq!(cancelled.status(), 200, "{}", log_c.lock().unwrap());
        let cancelled: Value = cancelled.json().await.unwrap();
        assert_eq!(cancelled["state"], "cancelled", "{cancelled}");
        let next = start_prompt(
            &client,
            &url_c,
            json!({ "input": "And now?", "conversationId": conversation }),
        )
        .await;
        let done = wait_for_state(&client, &url_c, &next, "completed").await;
        assert_eq!(
            done["output"][0]["content"], "Next prompt answered.",
            "{done}"
        );

        // Running on A, A killed, cancelled on C before A's lease runs out.
        let prompt =
            start_prompt(&client, &url_a, json!({ "input": "Take your time again" })).await;
        wait_for_state(&client, &url_c, &prompt, "running").await;
        a.kill().unwrap();
        a.wait().unwrap();
        let cancelled = client
            .post(format!("{url_c}/api/prompts/{prompt}/cancel"))
            .header("x-user-id", "alice")
            .send()
            .await
            .unwrap();
        assert!(
            [200, 202].contains(&cancelled.status().as_u16()),
            "{}",
            cancelled.text().await.unwrap()
        );
        let ended = wait_until(&client, &url_c, &prompt, "never ended", |stored| {
            stored["state"] != "running"
        })
        .await;
        assert_eq!(
            ended["state"],
            "cancelled",
            "{ended}\n{}",
            log_c.lock().unwrap()
        );
    });
    terminate(c.id());
    let _ = c.wait();
    runtime.block_on(drop_database(&database));
}
