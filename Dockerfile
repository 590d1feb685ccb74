# syntax=docker/dockerfile:1
#
# Sluice: one static-ish binary on a slim Debian base, run as a non-root user.
#
#   docker build -t sluice .
#   docker run --rm -p 8080:8080 -p 9092:9092 sluice            # the embedded default
#
# Not built on the machines this repository is developed on (they have no
# Docker engine); tests/deploy_static.rs checks this file statically.

# ---- build stage -----------------------------------------------------------
FROM rust:1.95-bookworm AS build
WORKDIR /src

# Build the dependencies first, against a placeholder crate, so that a change
# to Sluice's own sources does not rebuild them.
COPY Cargo.toml Cargo.lock ./
RUN mkdir src \
    && echo 'fn main() {}' > src/main.rs \
    && touch src/lib.rs \
    && cargo build --release --locked --bin sluice \
    && rm -rf src

COPY src ./src
# Touch the real sources so cargo sees them as newer than the placeholder.
RUN touch src/main.rs src/lib.rs \
    && cargo build --release --locked --bin sluice \
    && strip target/release/sluice

# ---- runtime stage ---------------------------------------------------------
FROM debian:bookworm-slim AS runtime

# CA roots for S3 and DynamoDB over TLS; nothing else is needed at run time.
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home-dir /var/lib/sluice --create-home --shell /usr/sbin/nologin sluice

COPY --from=build /src/target/release/sluice /usr/local/bin/sluice

USER 10001:10001
WORKDIR /var/lib/sluice
ENV SLUICE_DATA_DIR=/var/lib/sluice/data \
    SLUICE_LOG_FORMAT=json
EXPOSE 8080 9092

# Healthy means ready: GET /ready answers 200 only while the node is
# registered, not fenced and not shutting down. Bash's /dev/tcp keeps curl out
# of the image; the port follows SLUICE_HTTP_ADDR.
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
    CMD ["bash", "-c", "port=${SLUICE_HTTP_ADDR:-0.0.0.0:8080}; port=${port##*:}; exec 3<>/dev/tcp/127.0.0.1/$port && printf 'GET /ready HTTP/1.0\\r\\nHost: localhost\\r\\n\\r\\n' >&3 && head -n1 <&3 | grep -q ' 200 '"]

# A fenced node exits with code 3; run it under a supervisor that restarts it
# (compose `restart: unless-stopped`, an ECS service) and it rejoins at a new
# epoch.
ENTRYPOINT ["/usr/local/bin/sluice"]
CMD ["serve"]
