package luaexec

import lua "github.com/yuin/gopher-lua"

func (v *vm) cjsonLib() *lua.LTable    { return v.L.NewTable() }
func (v *vm) bitLib() *lua.LTable      { return v.L.NewTable() }
func (v *vm) structLib() *lua.LTable   { return v.L.NewTable() }
func (v *vm) cmsgpackLib() *lua.LTable { return v.L.NewTable() }
