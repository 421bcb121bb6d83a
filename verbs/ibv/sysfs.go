package ibv

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// sysfsClass is where the kernel publishes RDMA devices, including the
// type of every GID table entry of every port.
const sysfsClass = "/sys/class/infiniband"

// sysfsGIDType reads the type of GID entry index of a device's port from
// the sysfs tree at root. It is the fallback for libraries and kernels
// that cannot report the type through ibv_query_gid_ex.
func sysfsGIDType(root, dev string, port, index int) (int, error) {
	b, err := os.ReadFile(filepath.Join(root, dev, "ports", strconv.Itoa(port), "gid_attrs", "types", strconv.Itoa(index)))
	if err != nil {
		return gidTypeUnknown, err
	}
	return parseGIDType(string(b)), nil
}

// parseGIDType reads the kernel's name of a GID type: "RoCE v2", or
// "IB/RoCE v1", which on an InfiniBand port means IB.
func parseGIDType(s string) int {
	s = strings.ToLower(strings.TrimSpace(s))
	switch {
	case strings.HasSuffix(s, "v2"):
		return gidTypeRoCEv2
	case strings.HasSuffix(s, "v1"):
		return gidTypeRoCEv1
	case s == "ib":
		return gidTypeIB
	}
	return gidTypeUnknown
}
