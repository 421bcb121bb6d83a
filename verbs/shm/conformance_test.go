package shm

import (
	"testing"

	"github.com/rdmacell/rdmacell/verbs"
	"github.com/rdmacell/rdmacell/verbs/verbstest"
)

var provider = verbstest.Provider{
	Name: ProviderName,
	Open: func() (verbs.Device, error) { return Open(Options{}) },
}

func TestMain(m *testing.M) { verbstest.Main(m, provider) }

func TestConformance(t *testing.T) { verbstest.Run(t, provider) }
