# syntax=docker/dockerfile:1
# A projector binary in a minimal image: a static build, no shell.
#
#   docker build -t projector .                      # the cart's projector, cmd/projector
#
# Your own binary, from your main package: MODULE is the directory of its
# go.mod in the build context, MAIN its package there. The example in this
# repository:
#
#   docker build -t library-projector --build-arg MODULE=examples/library --build-arg MAIN=./cmd/library-projector .
#
# In your own repository, copy this file and build with MAIN=./cmd/<yours>.
# The binary is /usr/local/bin/projector in the image whatever its name.
# VERSION sets main.version: cmd/projector prints it; in your main, declare
# `var version string` and pass it as app.Config.Version to do the same.
FROM golang:1.26 AS build
ARG MODULE=.
ARG MAIN=./cmd/projector
ARG VERSION=docker
WORKDIR /src
COPY . .
WORKDIR /src/${MODULE}
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X main.version=${VERSION}" -o /out/projector ${MAIN}

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/projector /usr/local/bin/projector
USER nonroot:nonroot
ENTRYPOINT ["/usr/local/bin/projector"]
