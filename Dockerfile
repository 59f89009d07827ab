# syntax=docker/dockerfile:1
# agentq: worker, enqueuer, inspector (and demo, whose `demo agent` mode is a
# small exec agent used by deploy/agentq.yaml) in one image.

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# .git stays out of the context: the git commit the binaries report
# (`--version`, agentq_build_info) comes in as
# --build-arg REVISION=$(git rev-parse HEAD); without it, "unknown".
ARG REVISION=
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X github.com/agentq/agentq/internal/buildinfo.revision=${REVISION}" -o /out/ ./cmd/...

# debian-slim rather than distroless: exec agents usually need a shell
# environment of their own (interpreters, git, …) added in a derived image.
FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates tini \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /home/agentq --create-home agentq
COPY --from=build /out/ /usr/local/bin/
COPY deploy/agentq.yaml /etc/agentq/agentq.yaml
USER agentq
WORKDIR /home/agentq
# Ops endpoints (/healthz /readyz /metrics /api/v1/agents) when
# worker.http_addr is 0.0.0.0:9090, as in deploy/agentq.yaml.
EXPOSE 9090
# SIGTERM starts the worker's graceful shutdown (worker.shutdown_timeout).
STOPSIGNAL SIGTERM
# tini is PID 1: it forwards SIGTERM/SIGINT to the worker and reaps
# orphans. An exec agent's grandchildren that outlive their parent (or are
# killed with its process group) are reparented to PID 1; without an init
# nobody would wait() for them and they would stay zombies. -s keeps tini
# reaping when it is not PID 1 (docker run --init, compose init: true).
ENTRYPOINT ["/usr/bin/tini", "-s", "--"]
CMD ["worker", "--config", "/etc/agentq/agentq.yaml"]
