package luaexec

import (
	"bytes"
	"log/slog"
	"testing"
)

// redis.log joins its arguments with spaces into one message at the level
// it maps Redis's to (debug and verbose are debug, notice is info, warning
// is warn), tagged as the script's.
func TestRedisLog(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
		Level: slog.LevelDebug,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	h := newHarness(t, Options{logger: logger})
	h.expect([][2]string{{"redis.log(redis.LOG_WARNING, 'lock', 42, 'taken') redis.log(redis.LOG_VERBOSE, 'v') redis.log(redis.LOG_NOTICE, 1.5)", "nil"}})
	want := "level=WARN msg=\"lock 42 taken\" source=script\nlevel=DEBUG msg=v source=script\nlevel=INFO msg=1.5 source=script\n"
	if got := buf.String(); got != want {
		t.Errorf("logged:\n%s\nwant:\n%s", got, want)
	}
	// Without a logger the messages go nowhere.
	newHarness(t, Options{}).expect([][2]string{{"redis.log(redis.LOG_WARNING, 'x') return 1", ":1"}})
}
