#!/bin/sh
# t/libmc/replicated_place.t: replicated reads received in place, with
# servers killed and stopped (t/libmc/replicated_place.c), against $MC_SERVER.
exec "${top_builddir:?}/t/libmc/replicated_place"
