// Records the true-positive examples of gitleaks' default rules (issue 16: gitleaks as a test
// oracle). Our own file, dropped at test time into a copy of the pinned gitleaks module's
// cmd/generate/config/utils package (tests/gitleaks_oracle.py): gitleaks builds its default
// config (config/gitleaks.toml) by running that generator, which checks every rule against its
// examples through utils.Validate / utils.ValidateWithPaths. The copy renames those two
// functions to upstreamValidate / upstreamValidateWithPaths; the functions below take their
// names, append {"rule", "tps" | "paths"} as one JSON line to the file named by
// RF_GITLEAKS_EXAMPLES, and call the renamed originals, so the generator still validates every
// rule and writes the same config.

package utils

import (
	"encoding/json"
	"os"

	"github.com/zricethezav/gitleaks/v8/config"
)

type recordedExamples struct {
	Rule  string            `json:"rule"`
	TPs   []string          `json:"tps"`
	Paths map[string]string `json:"paths,omitempty"`
}

func recordExamples(r recordedExamples) {
	f, err := os.OpenFile(os.Getenv("RF_GITLEAKS_EXAMPLES"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	if err := json.NewEncoder(f).Encode(r); err != nil {
		panic(err)
	}
}

// Validate records a rule's true positives, then validates the rule as gitleaks does.
func Validate(rule config.Rule, truePositives []string, falsePositives []string) *config.Rule {
	recordExamples(recordedExamples{Rule: rule.RuleID, TPs: truePositives})
	return upstreamValidate(rule, truePositives, falsePositives)
}

// ValidateWithPaths records a path rule's true positives (path -> content), then validates it.
func ValidateWithPaths(rule config.Rule, truePositives map[string]string, falsePositives map[string]string) *config.Rule {
	recordExamples(recordedExamples{Rule: rule.RuleID, Paths: truePositives})
	return upstreamValidateWithPaths(rule, truePositives, falsePositives)
}
