package compat_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// GEOADD, GEOPOS, GEODIST and GEOHASH against redis-server, byte for byte:
// the scores (geohashes), the positions decoded from them, distances in each
// unit, standard geohashes, and the errors, in RESP2 and RESP3.
func TestDiffGeo(t *testing.T) {
	p := newPair(t)
	for _, proto := range []string{"2", "3"} {
		p.redis.Do("HELLO", proto)
		p.ls.Do("HELLO", proto)
		p.Run([][]string{
			{"DEL", "Sicily", "s", "g"},
			{"GEOADD", "Sicily", "13.361389", "38.115556", "Palermo", "15.087269", "37.502669", "Catania"},
			{"ZRANGE", "Sicily", "0", "-1", "WITHSCORES"},
			{"GEOPOS", "Sicily", "Palermo", "Catania", "NonExisting"},
			{"GEOPOS", "nokey", "a"},
			{"GEOPOS", "Sicily"},
			{"GEODIST", "Sicily", "Palermo", "Catania"},
			{"GEODIST", "Sicily", "Palermo", "Catania", "km"},
			{"GEODIST", "Sicily", "Palermo", "Catania", "MI"},
			{"GEODIST", "Sicily", "Palermo", "Catania", "ft"},
			{"GEODIST", "Sicily", "Palermo", "Catania", "yd"},
			{"GEODIST", "Sicily", "Palermo", "Catania", "km", "x"},
			{"GEODIST", "Sicily", "Palermo", "Nope"},
			{"GEODIST", "nokey", "a", "b"},
			{"GEODIST", "Sicily", "Palermo", "Palermo"},
			{"GEOHASH", "Sicily", "Palermo", "Catania", "Nope"},
			{"GEOHASH", "nokey", "a", "b"},
			// Options, as ZADD's.
			{"GEOADD", "Sicily", "NX", "13.361389", "38.115556", "Palermo", "15", "37", "Other"},
			{"GEOADD", "Sicily", "XX", "CH", "13.5", "38.1", "Palermo", "15", "37", "Another"},
			{"GEOADD", "Sicily", "CH", "13.5", "38.1", "Palermo"},
			{"GEOADD", "Sicily", "NX", "XX", "13.5", "38.1", "Palermo"},
			{"GEOADD", "Sicily", "GT", "13.5", "38.1", "Palermo"},
			{"GEOADD", "Sicily", "13.5", "38.1"},
			{"GEOADD", "Sicily", "13.5", "38.1", "a", "b"},
			{"GEOADD", "Sicily", "x", "38.1", "a"},
			{"GEOADD", "Sicily", "13.5", "nan", "a"},
			{"GEOADD", "Sicily", "200", "100", "a"},
			{"GEOADD", "Sicily", "-180", "-85.05112878", "edge", "180", "85.05112878", "edge2"},
			{"GEOADD", "Sicily", "180.000001", "0", "a"},
			{"GEOADD", "Sicily", "0", "85.05112879", "a"},
			{"GEOPOS", "Sicily", "edge", "edge2"},
			{"GEOHASH", "Sicily", "edge", "edge2"},
			{"GEODIST", "Sicily", "edge", "edge2"},
			{"GEOADD", "s"},
			{"GEOADD", "s", "1", "2"},
			// Another type.
			{"SET", "s", "x"},
			{"GEOADD", "s", "13.5", "38.1", "a"},
			{"GEOPOS", "s", "a"},
			{"GEODIST", "s", "a", "b"},
			{"GEOHASH", "s", "a"},
			{"GEODIST", "s", "a", "b", "yd"},
			// From a script: the error of the command, not an unknown command
			// (unit/scripting's "Consistent eval error reporting").
			{"EVAL", "return redis.call('GEOADD', 'Sicily2', '13.361389', '38.115556', 'Palermo')", "0"},
			{"SET", "Sicily3", "1"},
			{"EVAL", "return redis.call('GEOADD', 'Sicily3', '13.361389', '38.115556', 'Palermo')", "0"},
			{"EVAL", "return redis.pcall('GEOPOS', 'Sicily3', 'Palermo')", "0"},
		})
	}
	// Random points, round trip and distances: the same bytes as Redis's.
	rng := rand.New(rand.NewPCG(7, 11))
	var cmds [][]string
	for i := range 200 {
		long := rng.Float64()*360 - 180
		lat := rng.Float64()*170.1 - 85.05
		cmds = append(cmds, []string{"GEOADD", "g", fmt.Sprintf("%.6f", long), fmt.Sprintf("%.9f", lat), fmt.Sprint("m", i)})
	}
	for i := range 200 {
		cmds = append(cmds, []string{"GEOPOS", "g", fmt.Sprint("m", i)}, []string{"GEOHASH", "g", fmt.Sprint("m", i)},
			[]string{"GEODIST", "g", fmt.Sprint("m", i), fmt.Sprint("m", (i+1)%200), "km"})
	}
	cmds = append(cmds, []string{"ZRANGE", "g", "0", "-1", "WITHSCORES"})
	p.Run(cmds)
}
