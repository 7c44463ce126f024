# The projector binary in a minimal image: a static build, no shell.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=docker
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X main.version=${VERSION}" -o /out/projector ./cmd/projector

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/projector /usr/local/bin/projector
USER nonroot:nonroot
ENTRYPOINT ["/usr/local/bin/projector"]
