# One image for every rlbridge service: the Python package (environments, agents, experiment),
# the C agents (libzmq + msgpack-c) and the JavaScript agents (zeromq + @msgpack/msgpack).
FROM python:3.11-slim-bookworm

RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        gcc make pkg-config libzmq3-dev libmsgpack-dev nodejs npm \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY pyproject.toml README.md ./
COPY rlbridge ./rlbridge
RUN pip install --no-cache-dir .

COPY clients ./clients
RUN make -C clients/c \
    && cd clients/js && npm ci --omit=dev --no-audit --no-fund

# Keys made by the `keys` service live here; every process finds them through this variable.
ENV RLBRIDGE_CURVE_DIR=/keys \
    PATH="/app/clients/c/build:${PATH}"
VOLUME ["/keys", "/data"]
CMD ["rlbridge", "--help"]
