//! The quick start of `docs/quickstart.md`, run as written.
//!
//! The blocks fenced as `sh quickstart` run in order as one
//! `bash -euo pipefail` script in an empty directory, with the freshly built
//! `sluice` first on `PATH`. Every line of each `text quickstart-output`
//! block must appear in what the script printed. The one change made to the
//! text, so the test can run beside others: `localhost:8080` and
//! `localhost:9092` become free loopback ports, which the node gets through
//! `SLUICE_HTTP_ADDR` / `SLUICE_KAFKA_ADDR` and the client commands through
//! `SLUICE_URL`.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

struct QuickStart {
    script: String,
    expected: Vec<String>,
}

/// The marked blocks of a Markdown page.
fn extract(page: &str) -> QuickStart {
    let mut script = String::new();
    let mut expected = Vec::new();
    let mut current: Option<&str> = None;
    for line in page.lines() {
        let fence = line.trim_start();
        match current {
            None => {
                if let Some(info) = fence.strip_prefix("```") {
                    let info: Vec<&str> = info.split_whitespace().collect();
                    current = Some(match info.as_slice() {
                        ["sh", "quickstart"] => "sh",
                        ["text", "quickstart-output"] => "out",
                        _ => "other",
                    });
                }
            }
            Some(kind) => {
                if fence.starts_with("```") {
                    current = None;
                } else if kind == "sh" {
                    script.push_str(line);
                    script.push('\n');
                } else if kind == "out" && !line.trim().is_empty() {
                    expected.push(line.trim().to_string());
                }
            }
        }
    }
    QuickStart { script, expected }
}

#[test]
fn extract_takes_only_the_marked_blocks() {
    let page = "# t\n```sh\nnot me\n```\n```sh quickstart\necho a\n```\ntext\n```text quickstart-output\na\n\n```\n```sh quickstart\necho b\n```\n";
    let q = extract(page);
    assert_eq!(q.script, "echo a\necho b\n");
    assert_eq!(q.expected, ["a"]);
}

fn free_port() -> u16 {
    sluice::bench::ports::free_port().expect("a free loopback port")
}

#[test]
fn the_quick_start_works_when_pasted() {
    if Command::new("curl").arg("--version").output().is_err() {
        eprintln!("skipping: curl is not installed (the quick start uses it)");
        return;
    }
    let page = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/quickstart.md")).unwrap();
    let q = extract(&page);
    assert!(q.script.contains("sluice serve"), "the quick start starts a node");
    assert!(q.expected.len() >= 2, "the quick start shows what to expect");
    let (http, kafka) = (free_port(), free_port());
    let body = q
        .script
        .replace("localhost:8080", &format!("127.0.0.1:{http}"))
        .replace("localhost:9092", &format!("127.0.0.1:{kafka}"));
    // Stop the background node however the script ends.
    let script = format!("trap 'kill -9 $(jobs -p) 2>/dev/null || true' EXIT\n{body}");

    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_sluice"), bin.join("sluice")).unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());

    let mut child = Command::new("bash")
        .args(["-euo", "pipefail", "-c", &script])
        .current_dir(&work)
        .env("PATH", path)
        .env("SLUICE_HTTP_ADDR", format!("127.0.0.1:{http}"))
        .env("SLUICE_KAFKA_ADDR", format!("127.0.0.1:{kafka}"))
        .env("SLUICE_URL", format!("http://127.0.0.1:{http}"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    // A hang guard, not a timing assertion: a quick start that never ends
    // (a node that never becomes ready) must fail rather than hang CI.
    let deadline = Instant::now() + Duration::from_secs(180);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.wait();
            panic!("the quick start did not finish");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    // Anything the script left running in its process group goes too.
    unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
    let (out, err) = (stdout.join().unwrap(), stderr.join().unwrap());
    let log = std::fs::read_to_string(work.join("sluice.log")).unwrap_or_default();
    assert!(
        status.success(),
        "the quick start failed ({status}).\nscript:\n{script}\nstdout:\n{out}\nstderr:\n{err}\nnode log:\n{log}"
    );
    for want in &q.expected {
        assert!(
            out.lines().any(|l| l.contains(want.as_str())),
            "the quick start's output lacks {want:?}.\nstdout:\n{out}\nstderr:\n{err}"
        );
    }
}
