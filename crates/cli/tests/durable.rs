#![allow(clippy::unwrap_used, clippy::expect_used)]
//! A code-mode prompt whose server is killed mid-script, on SQLite: after a restart it is
//! `interrupted`, and `POST /api/prompts/{id}/continue` runs its script again from its
//! journal. The write it made before the kill is not made again, the command that was
//! running is not run again (its error reaches the script), and the rest runs live.

mod support;

use serde_json::{Value, json};
use support::{script, serve_with, start_prompt, wait_for_state, wait_until};

const SCRIPT: &str = r#"
- code: |
    fs.write({ path: "once.txt", content: "written before the kill" });
    const token = Math.floor(Math.random() * 1e9);
    output("token " + token);
    let slept;
    try { shell.exec({ command: "sleep 30" }); slept = "slept"; } catch (error) { slept = "interrupted"; }
    fs.write({ path: "after.txt", content: slept + " " + token });
    done("Wrote once.txt, then after.txt: " + slept + " " + token);
"#;

fn outputs_of<'a>(prompt: &'a Value, function: &str) -> Vec<&'a Value> {
    prompt["output"]
        .as_array()
        .map(|outputs| {
            outputs
                .iter()
                .filter(|output| output["function"] == function)
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn an_interrupted_code_prompt_continues_from_its_journal() {
    let dir = support::scratch().join("durable");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("files")).unwrap();
    let config = dir.join("agentic.toml");
    std::fs::write(
        &config,
        format!(
            "[fs]\nroot = \"{}\"\n\n[shell]\nallow = [\"sleep\"]\n\n[interpreter]\nautoApprove = true\n",
            dir.join("files").display()
        ),
    )
    .unwrap();
    let database = format!("sqlite://{}", dir.join("agentic.db").display());
    let options = ["--config", config.to_str().unwrap()];
    let first = script("durable-first", SCRIPT);
    // After the restart the model is never asked: the script is answered from its journal,
    // then runs on live to its done().
    let second = script("durable-second", "- text: \"the model was asked again\"\n");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let client = reqwest::Client::new();

    let (mut server, url, _) = serve_with(&first, &database, &options, &[]);
    let prompt = runtime.block_on(async {
        let prompt = start_prompt(
            &client,
            &url,
            json!({ "input": "Write the files", "mode": "code" }),
        )
        .await;
        // Killed while the command runs.
        wait_until(
            &client,
            &url,
            &prompt,
            "the command never started",
            |stored| {
                outputs_of(stored, "shell.exec")
                    .first()
                    .is_some_and(|call| call["result"]["type"] == "pending")
            },
        )
        .await;
        prompt
    });
    server.kill().unwrap();
    server.wait().unwrap();

    let (mut server, url, log) = serve_with(&second, &database, &options, &[]);
    runtime.block_on(async {
        // Found interrupted at startup (its process is gone).
        let stored = wait_for_state(&client, &url, &prompt, "interrupted").await;
        let token = stored["output"]
            .as_array()
            .unwrap()
            .iter()
            .find_map(|output| output["content"].as_str()?.strip_prefix("token "))
            .unwrap()
            .to_owned();

        // Not bob's to continue; and a prompt that is not interrupted cannot be.
        let bobs = client
            .post(format!("{url}/api/prompts/{prompt}/continue"))
            .header("x-user-id", "bob")
            .send()
            .await
            .unwrap();
        assert_eq!(bobs.status(), 404);
        let continued = client
            .post(format!("{url}/api/prompts/{prompt}/continue"))
            .header("x-user-id", "alice")
            .send()
            .await
            .unwrap();
        assert_eq!(continued.status(), 202);
        let accepted: Value = continued.json().await.unwrap();
        assert_eq!(accepted["promptId"], prompt.as_str());

        let done = wait_for_state(&client, &url, &prompt, "completed").await;
        let again = client
            .post(format!("{url}/api/prompts/{prompt}/continue"))
            .header("x-user-id", "alice")
            .send()
            .await
            .unwrap();
        assert_eq!(again.status(), 409);
        let body: Value = again.json().await.unwrap();
        assert_eq!(body["error"]["code"], "not_continuable", "{body}");

        // The write before the kill: once. The command: not run again, and the script read
        // why. The same token: Math.random() gave what it gave before.
        let writes = outputs_of(&done, "fs.write");
        assert_eq!(writes.len(), 2, "{done}");
        assert_eq!(writes[0]["input"]["path"], "once.txt");
        let slept = outputs_of(&done, "shell.exec");
        assert_eq!(slept.len(), 1, "{done}");
        let error = slept[0]["result"]["error"].as_str().unwrap_or_default();
        assert!(error.contains("not run again"), "{done}");
        let texts: Vec<&str> = done["output"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|output| output["content"].as_str())
            .collect();
        assert_eq!(
            texts,
            vec![
                format!("token {token}"),
                format!("Wrote once.txt, then after.txt: interrupted {token}")
            ],
            "{done}\n{}",
            log.lock().unwrap()
        );
        let after = std::fs::read_to_string(dir.join("files/alice/after.txt"))
            .or_else(|_| std::fs::read_to_string(dir.join("files/after.txt")))
            .unwrap();
        assert_eq!(after, format!("interrupted {token}"));
    });
    server.kill().unwrap();
    let _ = server.wait();
}
