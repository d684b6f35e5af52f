// Package lograte rate-limits log lines of one kind (rejected events,
// failed actions): at most a rate a second with a burst, the lines over
// it counted and the count given with the next line logged, so that a
// flood costs a few lines a second and says how much it left out. The
// journal keeps every event whatever the log shows.
package lograte
