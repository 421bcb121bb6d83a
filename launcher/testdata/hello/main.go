// Command hello is the smallest rank for the launcher's tests: a directory
// cellrun builds before running it. It prints its rank and world size.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Printf("hello from rank %s of %s\n", os.Getenv("RDMACELL_RANK"), os.Getenv("RDMACELL_WORLD_SIZE"))
}
