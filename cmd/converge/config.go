package main

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	json "github.com/go-json-experiment/json/v1"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"
)

// Configuration comes from four places, the first that has a setting
// winning: the command line, the environment (CONVERGE_<FLAG>, and the
// older names in envAliases), the YAML file of --config (its keys are
// the long flag names) and the flag's default (docs/configuration.md).

// configFlag is the flag naming the YAML configuration file.
const configFlag = "config"

// configurable are the commands whose own flags the environment and the
// configuration file set: the long-running ones. The other commands are
// one-off operations (desire's --power, approve's --all): only the global
// flags, and the few in alsoConfigurable, come from the environment or
// the file for them.
var configurable = map[string]bool{"up": true, "observer": true, "planner": true, "executor": true, "api": true, "sim": true, "notify": true}

// alsoConfigurable are flags of one-off commands that the environment
// sets too (they name a file a site keeps in one place).
var alsoConfigurable = map[string]bool{"sign-key": true}

// envAliases are the variables flags were read from before every flag
// had its CONVERGE_<FLAG>; they still work, after it.
var envAliases = map[string][]string{
	"nats":                  {"CONVERGE_NATS_URL"},
	"pve-url":               {"PVE_URL"},
	"pve-token-id":          {"PVE_TOKEN_ID"},
	"pve-token-secret":      {"PVE_TOKEN_SECRET"},
	"pve-token-secret-file": {"PVE_TOKEN_SECRET_FILE"},
	"pve-fingerprint":       {"PVE_FINGERPRINT"},
	"pve-ca":                {"PVE_CA"},
}

// envName is the variable of a flag: CONVERGE_ and its name in capitals,
// dashes as underscores.
func envName(flag string) string {
	return "CONVERGE_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// envNames are every variable of a flag, the preferred first.
func envNames(flag string) []string { return append([]string{envName(flag)}, envAliases[flag]...) }

// flagRef names a flag and its variable for messages:
// "--pve-url (or CONVERGE_PVE_URL)".
func flagRef(flag string) string { return "--" + flag + " (or " + envName(flag) + ")" }

// secretFlag reports whether a flag's value is masked when shown.
func secretFlag(name string) bool {
	if strings.HasSuffix(name, "-file") {
		return false
	}
	return strings.Contains(name, "password") || strings.Contains(name, "secret") || name == "sim-token" || name == "token"
}

// mask hides a secret's value, saying only whether it is set.
func mask(name, v string) string {
	if v == "" || !secretFlag(name) {
		return v
	}
	return "******"
}

// setting is one flag's effective value and where it came from.
type setting struct {
	Key    string `json:"key"`
	Value  string `json:"value"`
	Source string `json:"source"` // "flag", "env NAME", "file PATH", "default"
	Env    string `json:"env,omitempty"`
}

// skipFlag are flags that are no setting.
func skipFlag(name string) bool {
	return name == "help" || name == "version" || name == configFlag
}

// fromEnvOrFile reports whether cmd's flag f may be set by the
// environment and the configuration file.
func fromEnvOrFile(cmd *cobra.Command, f *pflag.Flag) bool {
	switch {
	case skipFlag(f.Name):
		return false
	case cmd.Name() == "up" && f.Name == "nats":
		// up runs its embedded server unless its own command line says
		// otherwise: CONVERGE_NATS_URL is meant for the CLI commands.
		return false
	case cmd.Root().PersistentFlags().Lookup(f.Name) == f:
		return true
	}
	return configurable[cmd.Name()] || alsoConfigurable[f.Name]
}

// configPath is the --config file: the flag, else CONVERGE_CONFIG.
func configPath(cmd *cobra.Command) string {
	if f := cmd.Flags().Lookup(configFlag); f != nil && f.Value.String() != "" {
		return f.Value.String()
	}
	return os.Getenv(envName(configFlag))
}

// loadConfigFile reads a YAML (or JSON) file of settings keyed by long
// flag name; unknown keys are refused.
func loadConfigFile(root *cobra.Command, path string) (map[string]any, error) {
	if path == "" {
		return nil, nil
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("--config %s: %w", path, err)
	}
	known := knownKeys(root)
	var unknown []string
	for k := range m {
		if !known[k] {
			unknown = append(unknown, strconv.Quote(k))
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, fmt.Errorf("--config %s: unknown key(s) %s: the keys are the long flag names (docs/configuration.md)", path, strings.Join(unknown, ", "))
	}
	return m, nil
}

// knownKeys are the flags a configuration file may set, for any command.
func knownKeys(root *cobra.Command) map[string]bool {
	out := map[string]bool{}
	add := func(cmd *cobra.Command) func(*pflag.Flag) {
		return func(f *pflag.Flag) {
			if fromEnvOrFile(cmd, f) {
				out[f.Name] = true
			}
		}
	}
	root.PersistentFlags().VisitAll(add(root))
	for _, c := range root.Commands() {
		c.Flags().VisitAll(add(c))
		c.PersistentFlags().VisitAll(add(c))
	}
	return out
}

// applyConfig sets every flag of cmd not given on its command line from
// the environment or the configuration file, and returns each flag's
// effective value and source (secrets masked).
func applyConfig(cmd *cobra.Command) ([]setting, error) {
	file := configPath(cmd)
	values, err := loadConfigFile(cmd.Root(), file)
	if err != nil {
		return nil, err
	}
	var out []setting
	var firstErr error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if skipFlag(f.Name) || firstErr != nil {
			return
		}
		s := setting{Key: f.Name, Source: "default"}
		ok := fromEnvOrFile(cmd, f)
		if ok {
			s.Env = envName(f.Name)
		}
		switch {
		case f.Changed:
			s.Source = "flag"
		case !ok:
		case setFromEnv(f, &s, &firstErr):
		default:
			if v, in := values[f.Name]; in {
				s.Source = "file " + file
				if err := setValue(f, v); err != nil {
					firstErr = fmt.Errorf("--config %s: %s: %w", file, f.Name, err)
				}
			}
		}
		s.Value = mask(f.Name, f.Value.String())
		out = append(out, s)
	})
	return out, firstErr
}

// setFromEnv sets f from the first of its variables that is set and not
// empty; it reports whether one was.
func setFromEnv(f *pflag.Flag, s *setting, errp *error) bool {
	for _, name := range envNames(f.Name) {
		v, ok := os.LookupEnv(name)
		if !ok || v == "" {
			continue
		}
		s.Source = "env " + name
		var err error
		if sv, isSlice := f.Value.(pflag.SliceValue); isSlice {
			err = sv.Replace(strings.Split(v, ","))
		} else {
			err = f.Value.Set(v)
		}
		if err != nil {
			*errp = fmt.Errorf("%s=%q: --%s wants a %s: %w", name, v, f.Name, f.Value.Type(), err)
		}
		return true
	}
	return false
}

// setValue sets f from a configuration file's value: a scalar, or a list
// for a flag that takes several.
func setValue(f *pflag.Flag, v any) error {
	if list, isList := v.([]any); isList {
		sv, isSlice := f.Value.(pflag.SliceValue)
		if !isSlice {
			return fmt.Errorf("a list, but --%s takes one %s", f.Name, f.Value.Type())
		}
		strs := make([]string, len(list))
		for i, e := range list {
			strs[i] = scalar(e)
		}
		return sv.Replace(strs)
	}
	if _, isMap := v.(map[string]any); isMap {
		return fmt.Errorf("a map, but --%s takes a %s", f.Name, f.Value.Type())
	}
	if err := f.Value.Set(scalar(v)); err != nil {
		return fmt.Errorf("--%s wants a %s: %w", f.Name, f.Value.Type(), err)
	}
	return nil
}

// scalar is a YAML scalar as a flag would be given it.
func scalar(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case json.Number:
		return x.String()
	default:
		return fmt.Sprint(x)
	}
}
