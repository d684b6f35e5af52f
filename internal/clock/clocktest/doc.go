// Package clocktest is test support: a [Fake] clock that moves only when a
// test advances it, firing the timers and tickers that fall due in time
// order. Nothing here is used outside tests.
package clocktest
