//! The `sluice` binary: `serve` runs a node; the other commands are clients
//! of a node's HTTP API.

use clap::{Parser, Subcommand};
use sluice::bench::BenchCmd;
use sluice::cli::{AdminCmd, ClientArgs, ConsumeArgs, ProduceArgs, TokensCmd, TopicsCmd};
use sluice::config::ServeArgs;
use std::process::ExitCode;

#[derive(Debug, Parser)]
#[command(name = "sluice", version, about = "Stream storage on an object store")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a node.
    Serve(Box<ServeArgs>),
    /// Prepare the stores named by the serve flags for local development:
    /// create the DynamoDB table of a dynamodb:// metadata log and check that
    /// the object store answers. (Production creates them with Terraform.)
    Init(Box<ServeArgs>),
    /// Create, list, describe and delete topics.
    Topics {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        command: TopicsCmd,
    },
    /// Append lines from stdin (or a file) as records.
    Produce {
        #[command(flatten)]
        client: ClientArgs,
        #[command(flatten)]
        args: ProduceArgs,
    },
    /// Print records of a topic; `--follow` tails over SSE.
    Consume {
        #[command(flatten)]
        client: ClientArgs,
        #[command(flatten)]
        args: ConsumeArgs,
    },
    /// Cluster administration.
    Admin {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        command: AdminCmd,
    },
    /// Issue, list and revoke tokens (servers with --auth on).
    Tokens {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        command: TokensCmd,
    },
    /// Load generator: throughput and latency percentiles.
    Bench {
        #[command(subcommand)]
        command: BenchCmd,
    },
}

async fn init(args: &ServeArgs) -> anyhow::Result<()> {
    let config = args
        .validate()
        .map_err(|e| anyhow::anyhow!("invalid configuration: {e}"))?;
    let objects = sluice::store::open_url(&config.object_store, &config.s3).await?;
    objects.list("meta/").await?;
    println!("object store {} answers", config.object_store);
    if config.metadata.starts_with("dynamodb://") {
        let log = sluice::meta::dynamo_log::DynamoLog::open(
            &config.metadata,
            config.dynamodb_endpoint.as_deref(),
            config.s3.region.as_deref(),
            objects,
        )
        .await?;
        log.ensure_table().await?;
        println!("table of {} is active", config.metadata);
    }
    Ok(())
}

/// Exit code of a node that was fenced: a supervisor should restart it.
const EXIT_FENCED: u8 = 3;

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Command::Serve(args) = &cli.command {
        // Validate before anything is opened; one line naming the flags.
        let config = match args.validate() {
            Ok(c) => c,
            Err(e) => {
                eprintln!("sluice: invalid configuration: {e}");
                return ExitCode::from(2);
            }
        };
        sluice::telemetry::init_logging(&config.log_format);
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("tokio runtime");
        return match rt.block_on(sluice::server::serve(config)) {
            Ok(sluice::server::Exit::Stopped) => ExitCode::SUCCESS,
            Ok(sluice::server::Exit::Fenced) => ExitCode::from(EXIT_FENCED),
            Err(e) => {
                eprintln!("sluice: {e:#}");
                ExitCode::FAILURE
            }
        };
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let result = rt.block_on(async move {
        match cli.command {
            Command::Serve(_) => unreachable!("handled above"),
            Command::Init(args) => init(&args).await,
            Command::Topics { client, command } => {
                client.install_token()?;
                command.run(&client.url).await
            }
            Command::Produce { client, args } => {
                client.install_token()?;
                args.run(&client.url).await
            }
            Command::Consume { client, args } => {
                client.install_token()?;
                args.run(&client.url).await
            }
            Command::Admin { client, command } => {
                client.install_token()?;
                command.run(&client.url).await
            }
            Command::Tokens { client, command } => {
                client.install_token()?;
                command.run(&client.url).await
            }
            Command::Bench { command } => command.run().await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sluice: {e:#}");
            ExitCode::FAILURE
        }
    }
}
