package control

import (
	"github.com/ThreeDotsLabs/watermill"
	"github.com/rs/zerolog"
)

// WatermillLogger routes a watermill router's logs to log, Info demoted to
// Debug (watermill is chatty per message): the one adapter of converge's
// routers (this package's and the notifier's).
func WatermillLogger(log zerolog.Logger) watermill.LoggerAdapter { return zerologAdapter{log: log} }

// zerologAdapter is WatermillLogger's adapter.
type zerologAdapter struct {
	log    zerolog.Logger
	fields watermill.LogFields
}

func (a zerologAdapter) ev(e *zerolog.Event, fields watermill.LogFields) *zerolog.Event {
	for k, v := range a.fields {
		e = e.Interface(k, v)
	}
	for k, v := range fields {
		e = e.Interface(k, v)
	}
	return e
}

func (a zerologAdapter) Error(msg string, err error, f watermill.LogFields) {
	a.ev(a.log.Error().Err(err), f).Msg(msg)
}
func (a zerologAdapter) Info(msg string, f watermill.LogFields)  { a.ev(a.log.Debug(), f).Msg(msg) }
func (a zerologAdapter) Debug(msg string, f watermill.LogFields) { a.ev(a.log.Debug(), f).Msg(msg) }
func (a zerologAdapter) Trace(msg string, f watermill.LogFields) { a.ev(a.log.Trace(), f).Msg(msg) }
func (a zerologAdapter) With(f watermill.LogFields) watermill.LoggerAdapter {
	return zerologAdapter{log: a.log, fields: a.fields.Add(f)}
}
