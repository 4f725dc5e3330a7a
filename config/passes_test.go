package config

// Every pass registers its section with package pass when it is linked;
// config never imports one, so its tests link them all, as the engine
// does.
import _ "github.com/ctxguard/ctxguard/pass/all"
