module github.com/revgate/projector

go 1.26

require github.com/cenkalti/backoff/v4 v4.3.0
