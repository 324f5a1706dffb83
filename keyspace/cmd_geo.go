package keyspace

import (
	"math"
	"strconv"
)

// GEOADD, GEOPOS, GEODIST and GEOHASH: Redis's geo index, a sorted set whose
// scores are 52-bit geohashes (interleaved latitude and longitude cells of
// 26 bits each), computed as Redis's geohash.c does so that scores, and the
// positions decoded from them, are the same bytes as redis-server's. The
// searches (GEORADIUS, GEOSEARCH and their variants) are not built yet.
// Arities and flags are Redis 7.0's.
func init() {
	addRows(
		&Command{Name: "geoadd", Arity: -5, Flags: Write | DenyOOM, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdGeoAdd},
		&Command{Name: "geopos", Arity: -2, Flags: ReadOnly, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdGeoPos},
		&Command{Name: "geodist", Arity: -4, Flags: ReadOnly, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdGeoDist},
		&Command{Name: "geohash", Arity: -2, Flags: ReadOnly, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdGeoHash},
	)
}

// The bounds of Redis's geohash (EPSG:900913, Web Mercator's latitudes).
const (
	geoLongMin = -180.0
	geoLongMax = 180.0
	geoLatMin  = -85.05112878
	geoLatMax  = 85.05112878
	geoStep    = 26 // bits per coordinate
	// earthRadius is the one Redis's distances use, in meters.
	earthRadius = 6372797.560856
)

// geoEncode is Redis's geohashEncode: each coordinate's cell within its
// range, interleaved, latitude in the even bits.
func geoEncode(long, lat, latMin, latMax float64) uint64 {
	latOffset := (lat - latMin) / (latMax - latMin) * (1 << geoStep)
	longOffset := (long - geoLongMin) / (geoLongMax - geoLongMin) * (1 << geoStep)
	return interleave(uint32(latOffset), uint32(longOffset))
}

// interleave spreads x over the even bits and y over the odd ones.
func interleave(x, y uint32) uint64 {
	spread := func(v uint32) uint64 {
		b := uint64(v)
		b = (b | b<<16) & 0x0000FFFF0000FFFF
		b = (b | b<<8) & 0x00FF00FF00FF00FF
		b = (b | b<<4) & 0x0F0F0F0F0F0F0F0F
		b = (b | b<<2) & 0x3333333333333333
		b = (b | b<<1) & 0x5555555555555555
		return b
	}
	return spread(x) | spread(y)<<1
}

// deinterleave undoes interleave: the even bits, and the odd ones.
func deinterleave(b uint64) (x, y uint32) {
	squash := func(v uint64) uint32 {
		v &= 0x5555555555555555
		v = (v | v>>1) & 0x3333333333333333
		v = (v | v>>2) & 0x0F0F0F0F0F0F0F0F
		v = (v | v>>4) & 0x00FF00FF00FF00FF
		v = (v | v>>8) & 0x0000FFFF0000FFFF
		v = (v | v>>16) & 0x00000000FFFFFFFF
		return uint32(v)
	}
	return squash(b), squash(b >> 1)
}

// geoDecode is Redis's decodeGeohash: the centre of the cell of a score,
// within the bounds.
func geoDecode(score float64) (long, lat float64) {
	ilat, ilong := deinterleave(uint64(score))
	const cells = 1 << geoStep
	latMin := geoLatMin + float64(ilat)*1.0/cells*(geoLatMax-geoLatMin)
	latMax := geoLatMin + float64(ilat+1)*1.0/cells*(geoLatMax-geoLatMin)
	longMin := geoLongMin + float64(ilong)*1.0/cells*(geoLongMax-geoLongMin)
	longMax := geoLongMin + float64(ilong+1)*1.0/cells*(geoLongMax-geoLongMin)
	long = min(max((longMin+longMax)/2, geoLongMin), geoLongMax)
	lat = min(max((latMin+latMax)/2, geoLatMin), geoLatMax)
	return long, lat
}

// geoDistance is Redis's geohashGetDistance: the haversine distance in
// meters, along the meridian alone when the longitudes are the same.
func geoDistance(long1, lat1, long2, lat2 float64) float64 {
	const degRad = math.Pi / 180.0
	v := math.Sin((long2*degRad - long1*degRad) / 2)
	if v == 0 {
		return earthRadius * math.Abs(lat2*degRad-lat1*degRad)
	}
	lat1r, lat2r := lat1*degRad, lat2*degRad
	u := math.Sin((lat2r - lat1r) / 2)
	a := u*u + math.Cos(lat1r)*math.Cos(lat2r)*v*v
	return 2.0 * earthRadius * math.Asin(math.Sqrt(a))
}

// GEOADD key [NX|XX] [CH] longitude latitude member [...]: ZADD of each
// member at the geohash of its position.
func cmdGeoAdd(c *Call) Reply {
	flags, coords := zaddOptions(c.Args[2:], zaddNX|zaddXX|zaddCH)
	if len(coords)%3 != 0 || flags&(zaddNX|zaddXX) == zaddNX|zaddXX {
		return ErrSyntax
	}
	pairs := make([][]byte, 0, len(coords)/3*2)
	for i := 0; i < len(coords); i += 3 {
		long, ok1 := parseFloat(coords[i])
		lat, ok2 := parseFloat(coords[i+1])
		if !ok1 || !ok2 {
			return errNotFloat
		}
		if long < geoLongMin || long > geoLongMax || lat < geoLatMin || lat > geoLatMax {
			return Error("ERR invalid longitude,latitude pair " + strconv.FormatFloat(long, 'f', 6, 64) + "," + strconv.FormatFloat(lat, 'f', 6, 64))
		}
		score := geoEncode(long, lat, geoLatMin, geoLatMax)
		pairs = append(pairs, strconv.AppendUint(nil, score, 10), coords[i+2])
	}
	c.Work += int64(len(pairs))
	return c.zadd(flags, pairs)
}

// geoScores returns the scores of the members named by args in the sorted
// set at key (ok false, with the error, if it is no sorted set); a missing
// member's is NaN.
func (c *Call) geoScores(key []byte, members [][]byte) ([]float64, Reply, bool) {
	z, ok := c.readZSet(key)
	if !ok {
		return nil, errWrongType, false
	}
	scores := make([]float64, len(members))
	for i, m := range members {
		scores[i] = math.NaN()
		if z != nil {
			if s, ok := z.dict[string(m)]; ok {
				scores[i] = s
			}
		}
	}
	c.Work += int64(len(members))
	return scores, Reply{}, true
}

// geoEach replies, for each member named in the command from its third
// argument on, what at says of its decoded position, or missing for one
// that the sorted set at key does not hold.
func (c *Call) geoEach(missing Reply, at func(long, lat float64) Reply) Reply {
	scores, err, ok := c.geoScores(c.Args[1], c.Args[2:])
	if !ok {
		return err
	}
	out := make([]Reply, len(scores))
	for i, s := range scores {
		out[i] = missing
		if !math.IsNaN(s) {
			out[i] = at(geoDecode(s))
		}
	}
	return Array(out...)
}

// GEOPOS key [member ...]: each member's position, or null.
func cmdGeoPos(c *Call) Reply {
	return c.geoEach(NullArray, func(long, lat float64) Reply { return Array(HumanDouble(long), HumanDouble(lat)) })
}

// geoUnit is the meters in one unit of a distance argument, or false.
func geoUnit(u []byte) (float64, bool) {
	switch {
	case eqFold(u, "m"):
		return 1, true
	case eqFold(u, "km"):
		return 1000, true
	case eqFold(u, "ft"):
		return 0.3048, true
	case eqFold(u, "mi"):
		return 1609.34, true
	}
	return 0, false
}

// GEODIST key member1 member2 [m|km|ft|mi]: their distance, 4 decimals, or
// null when either is missing.
func cmdGeoDist(c *Call) Reply {
	unit := 1.0
	switch len(c.Args) {
	case 4:
	case 5:
		u, ok := geoUnit(c.Args[4])
		if !ok {
			return Error("ERR unsupported unit provided. please use M, KM, FT, MI")
		}
		unit = u
	default:
		return ErrSyntax
	}
	scores, err, ok := c.geoScores(c.Args[1], c.Args[2:4])
	if !ok {
		return err
	}
	if math.IsNaN(scores[0]) || math.IsNaN(scores[1]) {
		return Null
	}
	long1, lat1 := geoDecode(scores[0])
	long2, lat2 := geoDecode(scores[1])
	return Bulk(strconv.FormatFloat(geoDistance(long1, lat1, long2, lat2)/unit, 'f', 4, 64))
}

// geoAlphabet is the standard geohash's base 32.
const geoAlphabet = "0123456789bcdefghjkmnpqrstuvwxyz"

// GEOHASH key [member ...]: each member's standard geohash (latitudes over
// -90..90), 11 characters, or null.
func cmdGeoHash(c *Call) Reply {
	return c.geoEach(Null, func(long, lat float64) Reply {
		bits := geoEncode(long, lat, -90, 90)
		var b [11]byte
		for j := range b {
			idx := 0 // 52 bits give ten characters and two bits: Redis pads with 0
			if j < 10 {
				idx = int(bits>>(52-(j+1)*5)) & 0x1f
			}
			b[j] = geoAlphabet[idx]
		}
		return Bulk(string(b[:]))
	})
}
