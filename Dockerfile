# syntax=docker/dockerfile:1
#
# One build, three images (pick one with --target):
#   worker   the durable-llm worker (default)
#   starter  the CLI: ask, show, codec-server, …
#   llmsim   the OpenAI-compatible fault-injecting simulator
#
#   docker build -t durable-llm-worker .
#   docker build --target starter -t durable-llm-starter .
#
# docker-compose.yml builds all three from here.

ARG GO_VERSION=1.26
ARG ALPINE_VERSION=3.22

FROM golang:${GO_VERSION} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/ ./worker ./starter ./llmsim/cmd/llmsim

# Alpine rather than distroless: busybox wget serves the healthchecks.
FROM alpine:${ALPINE_VERSION} AS runtime
RUN apk add --no-cache ca-certificates tzdata && addgroup -S app && adduser -S -G app app
COPY --from=build /out/ /usr/local/bin/
USER app

FROM runtime AS llmsim
EXPOSE 8000
HEALTHCHECK --interval=5s --timeout=3s --retries=20 CMD wget -qO /dev/null http://127.0.0.1:8000/healthz || exit 1
ENTRYPOINT ["llmsim", "--addr", "0.0.0.0:8000"]
CMD ["--scenario", "mixed"]

FROM runtime AS starter
ENTRYPOINT ["starter"]
CMD ["--help"]

FROM runtime AS worker
ENV METRICS_ADDR=0.0.0.0:9464
EXPOSE 9464
HEALTHCHECK --interval=10s --timeout=3s --retries=10 CMD wget -qO /dev/null http://127.0.0.1:9464/metrics || exit 1
ENTRYPOINT ["worker"]
