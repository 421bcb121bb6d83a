package bootstrap

import (
	"strconv"
	"strings"
)

// DefaultKeyPrefix is where jobs live in etcd unless Config.KeyPrefix says
// otherwise.
const DefaultKeyPrefix = "/rdmacell/jobs/"

// keyKind tells which part of the job a key belongs to.
type keyKind int

const (
	kindUnknown keyKind = iota
	kindSecret
	kindInfo
	kindExit
	kindBarrier
	kindP2P
	kindNote
)

// keyspace builds and parses the keys of one job.
type keyspace struct {
	prefix string // ends in "/"
}

func (k keyspace) secret() string { return k.prefix + "secret" }

func (k keyspace) info(rank int) string {
	return k.prefix + "member/" + strconv.Itoa(rank) + "/info"
}

func (k keyspace) exit(rank int) string {
	return k.prefix + "member/" + strconv.Itoa(rank) + "/exit"
}

// barrier puts the name last so that it may contain slashes.
func (k keyspace) barrier(rank int, gen int64, name string) string {
	return k.prefix + "barrier/" + strconv.Itoa(rank) + "/" + strconv.FormatInt(gen, 10) + "/" + name
}

// p2p puts the receiver first so that one rank's inbox is one sub-prefix, and
// the key last so that it may contain slashes.
func (k keyspace) p2p(from, to int, key string) string {
	return k.prefix + "p2p/" + strconv.Itoa(to) + "/" + strconv.Itoa(from) + "/" + key
}

// decision is the key of a decision of the job (see Job.Decide).
func (k keyspace) decision(name string) string { return k.prefix + "decision/" + name }

// note puts the name last so that it may contain slashes.
func (k keyspace) note(rank int, name string) string {
	return k.prefix + "note/" + strconv.Itoa(rank) + "/" + name
}

// parsedKey is a job key taken apart; which fields are set depends on kind.
type parsedKey struct {
	kind keyKind
	rank int // owner: the registering, arriving or publishing rank
	to   int
	gen  int64
	name string // barrier name, p2p key or note name
}

// parse takes a key of this job apart; keys it does not know (written by a
// newer version, or by hand) come back as kindUnknown and are ignored.
func (k keyspace) parse(key string) parsedKey {
	rest, ok := strings.CutPrefix(key, k.prefix)
	if !ok {
		return parsedKey{}
	}
	if rest == "secret" {
		return parsedKey{kind: kindSecret}
	}
	parts := strings.SplitN(rest, "/", 4)
	switch {
	case len(parts) == 3 && parts[0] == "member":
		rank, err := strconv.Atoi(parts[1])
		if err != nil {
			return parsedKey{}
		}
		switch parts[2] {
		case "info":
			return parsedKey{kind: kindInfo, rank: rank}
		case "exit":
			return parsedKey{kind: kindExit, rank: rank}
		}
	case len(parts) == 4 && parts[0] == "barrier":
		rank, err1 := strconv.Atoi(parts[1])
		gen, err2 := strconv.ParseInt(parts[2], 10, 64)
		if err1 != nil || err2 != nil {
			return parsedKey{}
		}
		return parsedKey{kind: kindBarrier, rank: rank, gen: gen, name: parts[3]}
	case len(parts) >= 3 && parts[0] == "note":
		rank, err := strconv.Atoi(parts[1])
		if err != nil {
			return parsedKey{}
		}
		name, _ := strings.CutPrefix(rest, "note/"+parts[1]+"/")
		return parsedKey{kind: kindNote, rank: rank, name: name}
	case len(parts) == 4 && parts[0] == "p2p":
		to, err1 := strconv.Atoi(parts[1])
		from, err2 := strconv.Atoi(parts[2])
		if err1 != nil || err2 != nil {
			return parsedKey{}
		}
		return parsedKey{kind: kindP2P, rank: from, to: to, name: parts[3]}
	}
	return parsedKey{}
}
