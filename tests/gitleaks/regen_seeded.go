// Our NewSecret for gitleaks' config generator (tests/gitleaks_oracle.py puts it in place of
// the copy's cmd/generate/secrets/regen.go): the same draw from a rule's regex by reggen, but
// seeded, so every machine records the same examples for a gitleaks version. The seed of a
// draw is the FNV-1a hash of the regex, XOR RF_GITLEAKS_SEED (an integer, 0 when unset), plus
// how many draws that regex had before (a rule that draws twice gets two values).

package secrets

import (
	"hash/fnv"
	"os"
	"strconv"

	"github.com/lucasjones/reggen"
)

var drawsOf = map[string]int64{}

// NewSecret draws one string that regex matches (reggen, limit 1), seeded as above.
func NewSecret(regex string) string {
	g, err := reggen.NewGenerator(regex)
	if err != nil {
		panic(err)
	}
	h := fnv.New64a()
	h.Write([]byte(regex))
	base, _ := strconv.ParseInt(os.Getenv("RF_GITLEAKS_SEED"), 10, 64)
	g.SetSeed((int64(h.Sum64()) ^ base) + drawsOf[regex])
	drawsOf[regex]++
	return g.Generate(1)
}
