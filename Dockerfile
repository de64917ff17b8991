# syntax=docker/dockerfile:1
#
# zetcd container image: a static binary on distroless, running as non-root.
#
#   docker build -t zetcd .
#   docker run -p 2181:2181 -p 9090:9090 zetcd                       # embedded etcd in /var/lib/zetcd
#   docker run -p 2181:2181 -p 9090:9090 zetcd --zkaddr 0.0.0.0:2181 --metrics-addr 0.0.0.0:9090 \
#       --endpoints http://etcd:2379                                  # in front of an etcd cluster
#
# docker stop sends SIGTERM: zetcd drains (--drain-timeout, default 10s); give docker stop a
# longer -t than that.

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=3.9.0-zetcd-dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/zetcd ./cmd/zetcd \
 && mkdir -p /out/state

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/zetcd /usr/local/bin/zetcd
COPY --from=build --chown=65532:65532 /out/state /var/lib/zetcd
USER 65532:65532
WORKDIR /var/lib/zetcd
VOLUME /var/lib/zetcd
# ZooKeeper clients, and --metrics-addr (/metrics, /healthz, /readyz).
EXPOSE 2181 9090
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/zetcd"]
CMD ["--zkaddr", "0.0.0.0:2181", "--metrics-addr", "0.0.0.0:9090", "--data-dir", "/var/lib/zetcd/data"]
