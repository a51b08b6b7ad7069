package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// commandHelp is the usage of each command, printed by `shoalctl help
// COMMAND` and `shoalctl COMMAND --help`. TestCommandHelp checks that
// every command has one, and that it names every flag of the command.
var commandHelp = map[string]string{
	"assign": `usage: shoalctl assign TOPIC [--owner ID] [--partitions N]

Assigns TOPIC to a node: to ID with --owner, else to one its shard leader
chooses among the live members. Assigning a topic again moves it and raises
its epoch.

  --owner ID        the node to own the topic
  --partitions N    the topic's partition count (default 1)
`,
	"lookup": `usage: shoalctl lookup TOPIC [--linearizable]

Shows who owns TOPIC, at which epoch, in which shard. A plain lookup may be
answered from a node's replica or routing cache; --linearizable asks the
shard's leader, which answers only with what is committed.

  --linearizable    read through the shard leader
`,
	"revoke": `usage: shoalctl revoke TOPIC

Removes TOPIC's assignment; its owner stops serving it. Prints the epoch of
the revocation.
`,
	"produce": `usage: shoalctl produce TOPIC MSG
       shoalctl produce TOPIC -

Appends MSG to TOPIC at its owner and prints the record's offset. With "-"
for MSG, reads records from standard input, one a line (the line break is
not part of the record), and sends them in batches of at most ` + fmt.Sprint(stdinBatchRecords) + ` records:
a batch goes out when it is full or when no more input is waiting, so
records typed by hand are sent at once. Prints one row (with --json one
line) per batch: its epoch, first offset and number of records.
`,
	"fetch": `usage: shoalctl fetch TOPIC [--from N] [--max-bytes N] [--format text|base64|raw]

Reads TOPIC's records from offset N (default 0) at its owner.

  --from N          first offset to read
  --max-bytes N     at most about N bytes of records (default: the node's cap)
  --format F        how record values are shown:
                      text    (default) as text; a value that is not UTF-8 is
                              shown Go-quoted in the table, and in --json as
                              base64 with "encoding":"base64" on its record
                      base64  every value base64 (in --json too, each record
                              with "encoding":"base64")
                      raw     the values' bytes as they are, each followed by a
                              line break; no table, not with --json
`,
	"members": `usage: shoalctl members

Lists the cluster's members as the node asked sees them: id, generation,
incarnation, state, rack and addresses.
`,
	"shards": `usage: shoalctl shards

Lists the metadata shards: their replicas, leader and term.
`,
	"status": `usage: shoalctl status [H:P]

Shows one node's status: generation, live members, shards hosted and led,
topics owned, readiness. H:P is the node's client address; without it, the
first server that answers.
`,
	"watch": `usage: shoalctl watch [TOPIC | --prefix P] [--from POS] [--splits]

Prints every change of a topic's assignment as it commits: of TOPIC, of
every topic whose name starts with P, or of every topic; one row (with
--json one line) per change: assigned, moved, updated or revoked. Runs
until interrupted, then prints on stderr the position to resume from.
--timeout bounds the start and each request, not the watch.

  --prefix P        watch the topics whose name starts with P
  --from POS        give the changes after POS, a position a watch printed
                    (default: from now); one the nodes no longer keep
                    fails with Compacted
  --splits          print each split of a watched shard too, after its
                    changes before it: "split", and S -> LOW HIGH
`,
	"topics": `usage: shoalctl topics [--prefix P] [--limit N] [--cursor C]
       shoalctl topics --all [--prefix P]

Lists the assigned topics of every shard, in shard order (a split
shard's halves in its place), a page at a time, each topic once across
splits; a page that is not the last ends with the cursor of the next one
("next" in --json). With --all, every topic: ranges of shards are listed
at once, page after page, and printed together in shard order.

  --prefix P        only the topics whose name starts with P
  --limit N         topics per page, 1 to 10000 (default 1000)
  --cursor C        list the page that starts at C
  --all             list every page (no --limit or --cursor)
`,
	"drain": `usage: shoalctl drain NODE

Takes NODE out of service: the cluster moves its topics (each to a new
owner at a new epoch, the old one fenced by its lease) and its shard
leaderships to other members, and gives it none until undrain; its replicas
stay. The mark survives restarts of any node. Shows on stderr what NODE
still holds, and returns once it owns and leads nothing; cut short, the
drain stays in force. The default --timeout is 10m.
`,
	"undrain": `usage: shoalctl undrain NODE

Lets a drained NODE take topics and shard leaderships again. Leaderships
come back as the placement balances them; topics moved away stay where
they went.
`,
	"transfer-leader": `usage: shoalctl transfer-leader SHARD NODE

Hands the leadership of SHARD to NODE, a voter of the shard that is not
drained, and prints the new leader's term. The shard manager leaves it
there until the membership or a drain changes the placement.
`,
	"split": `usage: shoalctl split SHARD

Splits SHARD in two: its leader proposes the split, and the shard's
topics, with their owners, epochs and leases, go on in the two halves of
its hash range, each a shard of its own on the same replicas. Prints the
shard, the leader that split it, its term, and the halves' shard
numbers; returns once both halves have leaders (docs/shards.md).
`,
	"remove": `usage: shoalctl remove NODE [--force]

Forgets NODE, gone for good: every live member records the removal, the
shard managers replace its replicas, and a node of that id back with its
old data stays out (one on an empty data directory joins as new). Shows on
stderr how many shards still count it, and returns once none does. The
default --timeout is 10m.

  --force           remove NODE even though it is alive, or no member knows it
`,
	"bench": `usage: shoalctl bench --op OP [--clients N] [--duration D] [--rate R] [--topics K] [--value-size B] [--conns N]

Drives a load at the cluster for D and reports ops/s, latency percentiles
and errors by code.

  --op OP           assign, lookup, lookup-lin, produce, fetch or mix
  --clients N       concurrent clients (default 64)
  --duration D      how long (default 10s)
  --rate R          total requests per second (default 0: closed loop)
  --topics K        topics the load spreads over (default 1000)
  --value-size B    bytes of each produced record (default 16)
  --conns N         connections to each node (default: from --clients)
`,
	"help": `usage: shoalctl help [COMMAND]

Prints the usage of COMMAND, or of shoalctl.
`,
	"completion": `usage: shoalctl completion bash|zsh|fish

Prints a completion script for the shell. For example:
  bash:  source <(shoalctl completion bash)
  zsh:   shoalctl completion zsh > "${fpath[1]}/_shoalctl"
  fish:  shoalctl completion fish > ~/.config/fish/completions/shoalctl.fish
`,
}

// completionWords are the words that may follow command c (bash and
// zsh): its flags and the global ones, or its fixed arguments.
func completionWords(c string) string {
	words := strings.Join(append(flagNames(c), flagNames("")...), " ")
	switch c {
	case "completion":
		words = strings.Join(completionShells, " ")
	case "fetch":
		words += " text base64 raw"
	case "bench":
		words += " " + strings.Join(benchOps, " ")
	}
	return words
}

// completionShells are the shells completion writes scripts for.
var completionShells = []string{"bash", "zsh", "fish"}

// commandNames are the commands in the order the usage lists them.
func commandNames() []string {
	names := make([]string, 0, len(commands))
	for name := range commands {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// flagNames are the flags of a command (or the global ones for ""), as
// --name, sorted.
func flagNames(cmd string) []string {
	flags := globalFlags
	if cmd != "" {
		flags = commands[cmd].flags
	}
	var out []string
	for name := range flags {
		if name != "h" {
			out = append(out, "--"+name)
		}
	}
	slices.Sort(out)
	return out
}

// writeCompletion writes the completion script for shell.
func writeCompletion(w io.Writer, shell string) error {
	cmds := strings.Join(commandNames(), " ")
	globals := strings.Join(flagNames(""), " ")
	var b strings.Builder
	switch shell {
	case "bash":
		b.WriteString("# bash completion for shoalctl: source <(shoalctl completion bash)\n")
		b.WriteString("_shoalctl() {\n")
		b.WriteString("    local cur=\"${COMP_WORDS[COMP_CWORD]}\" cmd= w\n")
		b.WriteString("    for w in \"${COMP_WORDS[@]:1:COMP_CWORD-1}\"; do\n")
		fmt.Fprintf(&b, "        case \" %s \" in *\" $w \"*) cmd=$w; break;; esac\n", cmds)
		b.WriteString("    done\n")
		b.WriteString("    local words\n")
		b.WriteString("    case \"$cmd\" in\n")
		fmt.Fprintf(&b, "        '') words=\"%s %s\";;\n", cmds, globals)
		for _, c := range commandNames() {
			words := completionWords(c)
			if c == "help" {
				words = cmds
			}
			fmt.Fprintf(&b, "        %s) words=\"%s\";;\n", c, words)
		}
		b.WriteString("    esac\n")
		b.WriteString("    COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n")
		b.WriteString("}\n")
		b.WriteString("complete -F _shoalctl shoalctl\n")
	case "zsh":
		b.WriteString("#compdef shoalctl\n# zsh completion for shoalctl: shoalctl completion zsh > \"${fpath[1]}/_shoalctl\"\n")
		b.WriteString("_shoalctl() {\n")
		b.WriteString("    local -a cmds\n")
		b.WriteString("    cmds=(\n")
		for _, c := range commandNames() {
			fmt.Fprintf(&b, "        '%s:%s'\n", c, summary(c))
		}
		b.WriteString("    )\n")
		b.WriteString("    local cmd=${words[(I)(" + strings.Join(commandNames(), "|") + ")]}\n")
		b.WriteString("    if (( cmd == 0 )); then\n")
		fmt.Fprintf(&b, "        _describe command cmds; compadd -- %s\n", globals)
		b.WriteString("        return\n")
		b.WriteString("    fi\n")
		b.WriteString("    case ${words[cmd]} in\n")
		for _, c := range commandNames() {
			if c == "help" {
				b.WriteString("        help) _describe command cmds;;\n")
				continue
			}
			fmt.Fprintf(&b, "        %s) compadd -- %s;;\n", c, completionWords(c))
		}
		b.WriteString("    esac\n")
		b.WriteString("}\n")
		b.WriteString("compdef _shoalctl shoalctl\n")
	case "fish":
		b.WriteString("# fish completion for shoalctl: shoalctl completion fish > ~/.config/fish/completions/shoalctl.fish\n")
		b.WriteString("complete -c shoalctl -f\n")
		for _, c := range commandNames() {
			fmt.Fprintf(&b, "complete -c shoalctl -n '__fish_use_subcommand' -a %s -d '%s'\n", c, summary(c))
		}
		for _, f := range flagNames("") {
			fmt.Fprintf(&b, "complete -c shoalctl -l %s\n", strings.TrimPrefix(f, "--"))
		}
		for _, c := range commandNames() {
			for _, f := range flagNames(c) {
				fmt.Fprintf(&b, "complete -c shoalctl -n '__fish_seen_subcommand_from %s' -l %s\n", c, strings.TrimPrefix(f, "--"))
			}
		}
		fmt.Fprintf(&b, "complete -c shoalctl -n '__fish_seen_subcommand_from help' -a '%s'\n", cmds)
		fmt.Fprintf(&b, "complete -c shoalctl -n '__fish_seen_subcommand_from completion' -a '%s'\n", strings.Join(completionShells, " "))
		b.WriteString("complete -c shoalctl -n '__fish_seen_subcommand_from fetch' -l format -xa 'text base64 raw'\n")
		fmt.Fprintf(&b, "complete -c shoalctl -n '__fish_seen_subcommand_from bench' -l op -xa '%s'\n", strings.Join(benchOps, " "))
	default:
		return usagef("completion: want bash, zsh or fish, not %q", clip(shell))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// summary is the first sentence of a command's help, for the shells that
// show one beside each command.
func summary(cmd string) string {
	h := commandHelp[cmd]
	_, body, _ := strings.Cut(h, "\n\n")
	s, _, _ := strings.Cut(strings.Join(strings.Fields(body), " "), ".")
	s = strings.ReplaceAll(s, "'", "")
	s = strings.ReplaceAll(s, ":", " ")
	return s
}
