package subscription_test

import (
	"testing"

	"github.com/revgate/projector/internal/sourcetest"
)

// The acceptance suite of the sources, on EventStore-Client-Go v4 against
// the esdbtest double.
func TestSources_on_EventStore_Client_Go_v4(t *testing.T) { sourcetest.Run(t, kit) }
