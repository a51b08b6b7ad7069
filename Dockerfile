# Shoal's container image: shoal and shoalctl, static, on an empty base,
# running as a non-root user with its data directory a volume.
#
#   docker build -t shoal --build-arg VERSION=$(git describe --always) --build-arg COMMIT=$(git rev-parse --short=12 HEAD) .
#   docker run -v shoal-n1:/var/lib/shoal -e SHOAL_ID=n1 ... shoal
#
# Every flag of `shoal node` can be given as its SHOAL_* variable
# (docs/operations.md, "shoal node flags"); deploy/docker-compose.yml runs a
# 3-node cluster.

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The .git directory is not sent to the build (.dockerignore): the version
# and commit come from these arguments instead.
ARG VERSION=""
ARG COMMIT=""
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X github.com/shoalmq/shoal/internal/version.linkVersion=${VERSION} -X github.com/shoalmq/shoal/internal/version.linkCommit=${COMMIT}" \
      -o /out/ ./cmd/shoal ./cmd/shoalctl \
 && mkdir -p /out/data

# Nothing but the two binaries and the data directory: no libc (the
# binaries are static), no shell, no system CA bundle (the node's TLS
# trusts only --tls-ca). uid 65532 owns the data and runs the node.
FROM scratch
COPY --from=build /out/shoal /out/shoalctl /usr/local/bin/
COPY --from=build --chown=65532:65532 /out/data /var/lib/shoal
USER 65532:65532
ENV SHOAL_DATA=/var/lib/shoal \
    SHOAL_METRICS_ADDR=:7401 \
    SHOAL_LOG_FORMAT=json
VOLUME ["/var/lib/shoal"]
# client, peer, SWIM (UDP, and TCP for push-pull), metrics
EXPOSE 7101/tcp 7201/tcp 7301/tcp 7301/udp 7401/tcp
ENTRYPOINT ["/usr/local/bin/shoal"]
CMD ["node"]
