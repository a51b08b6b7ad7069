package swim

// Supersedes reports whether a record of a member — generation gen,
// incarnation inc, state st — replaces what is known of it (kgen, kinc,
// kst) by SWIM's merge rules, as Node applies them: a higher generation
// wins; within one generation a final state (dead, left) wins over a live
// one and is never replaced; between live states a higher incarnation
// wins, and at equal incarnation suspect wins over alive. Other layers
// that merge member lists (the node's metadata sync) use it so that they
// order records exactly as SWIM does.
func Supersedes(gen, inc uint64, st State, kgen, kinc uint64, kst State) bool {
	if gen != kgen {
		return gen > kgen
	}
	if f, kf := st.final(), kst.final(); f != kf {
		return f
	} else if kf {
		return false
	}
	if inc != kinc {
		return inc > kinc
	}
	return st == StateSuspect && kst == StateAlive
}
