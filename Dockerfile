# memproxy: build with the project's own setup script, run as a non-root user.
#   docker build -t memproxy .
#   docker run -p 8080:8080 -e OPENAI_API_KEY -e MEMPROXY_CLIENT_KEY=... memproxy \
#       --upstream https://api.openai.com/v1
#   docker run -p 8080:8080 -v $PWD/memproxy.yaml:/etc/memproxy/memproxy.yaml memproxy \
#       --config /etc/memproxy/memproxy.yaml

FROM debian:bookworm-slim AS build
WORKDIR /src
COPY scripts/setup scripts/setup
RUN ./scripts/setup
COPY . .
RUN meson setup /build --buildtype=release \
    && ninja -C /build proxy/memproxy tests/mock_upstream

FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
       libevent-core-2.1-7 libevent-extra-2.1-7 libevent-pthreads-2.1-7 libcurl4 libjansson4 \
       libyaml-0-2 libsqlite3-0 libpq5 libssl3 ca-certificates curl \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home-dir /var/lib/memproxy memproxy \
    && mkdir -p /var/lib/memproxy /etc/memproxy \
    && chown memproxy /var/lib/memproxy
COPY --from=build /build/proxy/memproxy /usr/local/bin/memproxy
COPY --from=build /build/tests/mock_upstream /usr/local/bin/memproxy-mock-upstream
COPY config/memproxy.example.yaml /etc/memproxy/memproxy.example.yaml
USER memproxy
WORKDIR /var/lib/memproxy
# the state directory (the session database lives here)
VOLUME /var/lib/memproxy
ENV MEMPROXY_LISTEN=0.0.0.0:8080
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s \
    CMD curl -fsS http://127.0.0.1:8080/healthz || exit 1
STOPSIGNAL SIGTERM
ENTRYPOINT ["memproxy"]
