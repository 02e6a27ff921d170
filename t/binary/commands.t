#!/usr/bin/perl
# t/binary/commands.t: every binary-protocol opcode memcached 1.6 serves,
# loud and quiet, with their status codes, texts, extras and opaque echo,
# against $MC_SERVER (our server or Debian's memcached).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";
use Test::More;
use MCTest;
use MCBinary;

my $srv = start_server();
my $s   = $srv->connect;
my $next_opaque = 0x51000000;

# Sends one request with a fresh opaque; returns (reply, opaque).
sub call {
    my ($op, %a) = @_;
    my $opaque = $next_opaque++;
    return (bin_call($s, bin_req($op, %a, opaque => $opaque)), $opaque);
}

# Compares the named fields of a reply (one assertion).
sub reply_is {
    my ($r, $want, $name) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    return fail("$name: no reply") unless $r;
    my %got = map { $_ => $r->{$_} } keys %$want;
    return is_deeply(\%got, $want, $name);
}

# A NOOP closes a batch; the reply to it proves what came before is all.
sub noop_is_next {
    my ($name) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    my $opaque = $next_opaque++;
    mc_send($s, bin_req($OP{noop}, opaque => $opaque));
    my $r = bin_read($s);
    reply_is($r, { opcode => $OP{noop}, status => 0, opaque => $opaque, bodylen => 0 }, $name);
}

my ($r, $o);

# ---- noop, version ---------------------------------------------------------
($r, $o) = call($OP{noop});
reply_is($r, { magic => 0x81, opcode => $OP{noop}, status => 0, opaque => $o, bodylen => 0,
    extlen => 0, keylen => 0, cas => 0 }, 'noop: empty success reply with the opaque');
($r, $o) = call($OP{version});
reply_is($r, { opcode => $OP{version}, status => 0, opaque => $o }, 'version: success');
like($r->{value}, qr/^\d+\.\d+\.\d+/, 'version: the body is a version number');

# ---- set, get family -----------------------------------------------------------
($r, $o) = call($OP{set}, key => 'k1', extras => ext_store(0xdeadbeef, 0), value => 'hello');
reply_is($r, { opcode => $OP{set}, status => 0, opaque => $o, bodylen => 0 }, 'set: success');
my $cas1 = $r->{cas};
ok($cas1 > 0, 'set: the reply carries the new cas');

($r, $o) = call($OP{get}, key => 'k1');
reply_is($r, { opcode => $OP{get}, status => 0, opaque => $o, extlen => 4, keylen => 0,
    value => 'hello', cas => $cas1 }, 'get hit: flags extras, value, cas');
is(flags_of($r), 0xdeadbeef, 'get hit: the stored flags');

($r, $o) = call($OP{getk}, key => 'k1');
reply_is($r, { opcode => $OP{getk}, status => 0, opaque => $o, extlen => 4, keylen => 2,
    key => 'k1', value => 'hello', cas => $cas1 }, 'getk hit: the key comes back');

($r, $o) = call($OP{get}, key => 'missing');
reply_is($r, { opcode => $OP{get}, status => $ST{key_enoent}, opaque => $o, value => 'Not found',
    extlen => 0, keylen => 0, cas => 0 }, 'get miss: KEY_ENOENT "Not found"');
($r, $o) = call($OP{getk}, key => 'missing');
reply_is($r, { opcode => $OP{getk}, status => $ST{key_enoent}, opaque => $o, key => 'missing',
    value => '', extlen => 0 }, 'getk miss: KEY_ENOENT with the key as body');

for my $q (qw(getq getkq)) {
    my $opq = $next_opaque++;
    mc_send($s, bin_req($OP{$q}, key => 'missing', opaque => $next_opaque++)
          . bin_req($OP{$q}, key => 'k1', opaque => $opq));
    $r = bin_read($s);
    reply_is($r, { opcode => $OP{$q}, status => 0, opaque => $opq, value => 'hello',
        key => ($q eq 'getkq' ? 'k1' : '') }, "$q: the miss is silent, the hit is answered");
    noop_is_next("$q: nothing else was sent");
}

# ---- add, replace, set quiet ------------------------------------------------------
($r, $o) = call($OP{add}, key => 'k1', extras => ext_store(0, 0), value => 'x');
reply_is($r, { opcode => $OP{add}, status => $ST{key_eexists}, opaque => $o,
    value => 'Data exists for key.' }, 'add on an existing key: KEY_EEXISTS');
($r, $o) = call($OP{add}, key => 'k2', extras => ext_store(2, 0), value => 'two');
reply_is($r, { opcode => $OP{add}, status => 0, opaque => $o }, 'add on a new key: success');
($r, $o) = call($OP{replace}, key => 'nokey', extras => ext_store(0, 0), value => 'x');
reply_is($r, { opcode => $OP{replace}, status => $ST{key_enoent}, opaque => $o,
    value => 'Not found' }, 'replace on a missing key: KEY_ENOENT');
($r, $o) = call($OP{replace}, key => 'k2', extras => ext_store(3, 0), value => 'TWO');
reply_is($r, { opcode => $OP{replace}, status => 0, opaque => $o }, 'replace existing: success');
($r, $o) = call($OP{get}, key => 'k2');
reply_is($r, { status => 0, value => 'TWO' }, 'replace stored the new value');
is(flags_of($r), 3, 'replace stored the new flags');

mc_send($s, bin_req($OP{setq}, key => 'k3', extras => ext_store(0, 0), value => 'v3')
      . bin_req($OP{addq}, key => 'k4', extras => ext_store(0, 0), value => 'v4')
      . bin_req($OP{replaceq}, key => 'k4', extras => ext_store(0, 0), value => 'v4b'));
noop_is_next('setq, addq, replaceq: successes are silent');
my $op_err = $next_opaque++;
mc_send($s, bin_req($OP{addq}, key => 'k3', extras => ext_store(0, 0), value => 'x',
    opaque => $op_err));
$r = bin_read($s);
reply_is($r, { opcode => $OP{addq}, status => $ST{key_eexists}, opaque => $op_err },
    'addq on an existing key: the error is answered');
$op_err = $next_opaque++;
mc_send($s, bin_req($OP{replaceq}, key => 'nokey', extras => ext_store(0, 0), value => 'x',
    opaque => $op_err));
$r = bin_read($s);
reply_is($r, { opcode => $OP{replaceq}, status => $ST{key_enoent}, opaque => $op_err },
    'replaceq on a missing key: the error is answered');
($r) = call($OP{get}, key => 'k4');
reply_is($r, { status => 0, value => 'v4b' }, 'addq then replaceq stored their values');

# ---- append, prepend ----------------------------------------------------------------
($r, $o) = call($OP{append}, key => 'k1', value => ' world');
reply_is($r, { opcode => $OP{append}, status => 0, opaque => $o }, 'append: success');
($r, $o) = call($OP{prepend}, key => 'k1', value => 'say ');
reply_is($r, { opcode => $OP{prepend}, status => 0, opaque => $o }, 'prepend: success');
($r) = call($OP{get}, key => 'k1');
reply_is($r, { status => 0, value => 'say hello world' }, 'append and prepend joined the value');
is(flags_of($r), 0xdeadbeef, 'append and prepend keep the flags');
for my $c (qw(append prepend)) {
    ($r, $o) = call($OP{$c}, key => 'nokey', value => 'x');
    reply_is($r, { opcode => $OP{$c}, status => $ST{not_stored}, opaque => $o,
        value => 'Not stored.' }, "$c on a missing key: NOT_STORED");
}
mc_send($s, bin_req($OP{appendq}, key => 'k2', value => '!')
      . bin_req($OP{prependq}, key => 'k2', value => '<'));
noop_is_next('appendq, prependq: successes are silent');
($r) = call($OP{get}, key => 'k2');
reply_is($r, { status => 0, value => '<TWO!' }, 'appendq and prependq changed the value');
for my $c (qw(appendq prependq)) {
    my $opq = $next_opaque++;
    mc_send($s, bin_req($OP{$c}, key => 'nokey', value => 'x', opaque => $opq));
    reply_is(bin_read($s), { opcode => $OP{$c}, status => $ST{not_stored}, opaque => $opq },
        "$c on a missing key: the error is answered");
}

# ---- delete ---------------------------------------------------------------------------
($r, $o) = call($OP{delete}, key => 'k4');
reply_is($r, { opcode => $OP{delete}, status => 0, opaque => $o, bodylen => 0 },
    'delete: success');
($r, $o) = call($OP{delete}, key => 'k4');
reply_is($r, { opcode => $OP{delete}, status => $ST{key_enoent}, opaque => $o,
    value => 'Not found' }, 'delete of a missing key: KEY_ENOENT');
mc_send($s, bin_req($OP{deleteq}, key => 'k3'));
noop_is_next('deleteq: success is silent');
($r) = call($OP{get}, key => 'k3');
is($r && $r->{status}, $ST{key_enoent}, 'deleteq removed the key');
$op_err = $next_opaque++;
mc_send($s, bin_req($OP{deleteq}, key => 'k3', opaque => $op_err));
reply_is(bin_read($s), { opcode => $OP{deleteq}, status => $ST{key_enoent}, opaque => $op_err },
    'deleteq of a missing key: the error is answered');

# ---- incr, decr -----------------------------------------------------------------------
($r, $o) = call($OP{incr}, key => 'ctr', extras => ext_arith(1, 5, 0xffffffff));
reply_is($r, { opcode => $OP{incr}, status => $ST{key_enoent}, opaque => $o },
    'incr of a missing key with expiration 0xffffffff: KEY_ENOENT');
($r, $o) = call($OP{incr}, key => 'ctr', extras => ext_arith(1, 5, 0));
reply_is($r, { opcode => $OP{incr}, status => 0, opaque => $o, bodylen => 8, extlen => 0 },
    'incr of a missing key: created');
is(u64_of($r->{value}), 5, 'incr of a missing key: the initial value, not incremented');
ok($r->{cas} > 0, 'incr: the reply carries the cas');
($r, $o) = call($OP{incr}, key => 'ctr', extras => ext_arith(10, 99, 0));
is(u64_of($r->{value}), 15, 'incr adds the delta');
($r, $o) = call($OP{decr}, key => 'ctr', extras => ext_arith(4, 99, 0));
reply_is($r, { opcode => $OP{decr}, status => 0, opaque => $o }, 'decr: success');
is(u64_of($r->{value}), 11, 'decr subtracts the delta');
($r) = call($OP{decr}, key => 'ctr', extras => ext_arith(100, 0, 0));
is(u64_of($r->{value}), 0, 'decr stops at 0');
# memcached pads a counter that got shorter with spaces, in place
($r) = call($OP{get}, key => 'ctr');
like($r && $r->{value}, qr/^0 *\z/, 'the counter is stored as decimal text');
($r) = call($OP{decr}, key => 'dctr', extras => ext_arith(3, 7, 0));
is(u64_of($r->{value}), 7, 'decr of a missing key: created with the initial value');
($r) = call($OP{incr}, key => 'ctr', extras => ext_arith(18446744073709551615, 0, 0));
($r) = call($OP{incr}, key => 'ctr', extras => ext_arith(2, 0, 0));
is(u64_of($r->{value}), 1, 'incr wraps around at 2^64');
($r, $o) = call($OP{incr}, key => 'k1', extras => ext_arith(1, 0, 0));
reply_is($r, { opcode => $OP{incr}, status => $ST{delta_badval}, opaque => $o,
    value => 'Non-numeric server-side value for incr or decr' },
    'incr of a non-numeric value: DELTA_BADVAL');
mc_send($s, bin_req($OP{incrq}, key => 'ctr', extras => ext_arith(5, 0, 0))
      . bin_req($OP{decrq}, key => 'ctr', extras => ext_arith(2, 0, 0))
      . bin_req($OP{incrq}, key => 'qctr', extras => ext_arith(1, 42, 0)));
noop_is_next('incrq, decrq: successes are silent');
($r) = call($OP{get}, key => 'ctr');
like($r && $r->{value}, qr/^4 *\z/, 'incrq and decrq changed the counter');
($r) = call($OP{get}, key => 'qctr');
reply_is($r, { status => 0, value => '42' }, 'incrq of a missing key created it');
$op_err = $next_opaque++;
mc_send($s, bin_req($OP{decrq}, key => 'nokey', extras => ext_arith(1, 0, 0xffffffff),
    opaque => $op_err));
reply_is(bin_read($s), { opcode => $OP{decrq}, status => $ST{key_enoent}, opaque => $op_err },
    'decrq of a missing key with expiration 0xffffffff: the error is answered');

# ---- touch, gat family --------------------------------------------------------------------
# An expiration beyond 30 days is a unix time; 30 days + 1 s is long past.
my $past = 60 * 60 * 24 * 30 + 1;
($r, $o) = call($OP{set}, key => 't1', extras => ext_store(77, 0), value => 'tv');
my $tcas = $r->{cas};
($r, $o) = call($OP{touch}, key => 't1', extras => ext_exp(1000));
reply_is($r, { opcode => $OP{touch}, status => 0, opaque => $o, extlen => 4, keylen => 0,
    bodylen => 4, cas => $tcas }, 'touch hit: flags only, no value');
is(flags_of($r), 77, 'touch hit: the flags');
($r, $o) = call($OP{touch}, key => 'nokey', extras => ext_exp(1000));
reply_is($r, { opcode => $OP{touch}, status => $ST{key_enoent}, opaque => $o,
    value => 'Not found' }, 'touch miss: KEY_ENOENT');
($r, $o) = call($OP{gat}, key => 't1', extras => ext_exp(1000));
reply_is($r, { opcode => $OP{gat}, status => 0, opaque => $o, extlen => 4, keylen => 0,
    value => 'tv' }, 'gat hit: flags and value');
($r, $o) = call($OP{gatk}, key => 't1', extras => ext_exp(1000));
reply_is($r, { opcode => $OP{gatk}, status => 0, opaque => $o, key => 't1', value => 'tv' },
    'gatk hit: key and value');
($r, $o) = call($OP{gat}, key => 'nokey', extras => ext_exp(1000));
reply_is($r, { opcode => $OP{gat}, status => $ST{key_enoent}, opaque => $o,
    value => 'Not found' }, 'gat miss: KEY_ENOENT');
($r, $o) = call($OP{gatk}, key => 'nokey', extras => ext_exp(1000));
reply_is($r, { opcode => $OP{gatk}, status => $ST{key_enoent}, opaque => $o, key => 'nokey',
    value => '' }, 'gatk miss: KEY_ENOENT with the key');
for my $q (qw(gatq gatkq)) {
    my $opq = $next_opaque++;
    mc_send($s, bin_req($OP{$q}, key => 'nokey', extras => ext_exp(1000), opaque => $next_opaque++)
          . bin_req($OP{$q}, key => 't1', extras => ext_exp(1000), opaque => $opq));
    reply_is(bin_read($s), { opcode => $OP{$q}, status => 0, opaque => $opq, value => 'tv',
        key => ($q eq 'gatkq' ? 't1' : '') }, "$q: the miss is silent, the hit is answered");
    noop_is_next("$q: nothing else was sent");
}
# binary expirations are unsigned: 0xffffffff is a unix time far ahead
call($OP{set}, key => 'far', extras => ext_store(0, 0xffffffff), value => 'later');
($r) = call($OP{get}, key => 'far');
reply_is($r, { status => 0, value => 'later' }, 'expiration 0xffffffff: far in the future');
($r) = call($OP{touch}, key => 't1', extras => ext_exp($past));
is($r && $r->{status}, 0, 'touch to a time in the past: success');
($r) = call($OP{get}, key => 't1');
is($r && $r->{status}, $ST{key_enoent}, 'touch set the new expiration: the item is gone');
call($OP{set}, key => 't2', extras => ext_store(0, 0), value => 'x');
($r) = call($OP{gat}, key => 't2', extras => ext_exp($past));
reply_is($r, { status => 0, value => 'x' }, 'gat to a time in the past returns the value');
($r) = call($OP{get}, key => 't2');
is($r && $r->{status}, $ST{key_enoent}, 'gat set the new expiration: the item is gone');

# ---- stat -----------------------------------------------------------------------------------
my $st = bin_stats($s);
ok($st && $st->{pid} && $st->{pid} == $srv->pid, 'stat: general stats carry the server pid');
ok($st && defined $st->{cmd_get} && defined $st->{curr_items}, 'stat: cmd_get and curr_items');
$st = bin_stats($s, 'settings');
ok($st && $st->{maxbytes} && defined $st->{item_size_max}, 'stat settings');
$st = bin_stats($s, 'items');
ok($st && grep(/^items:\d+:number$/, keys %$st), 'stat items: per-class item counts');
$st = bin_stats($s, 'slabs');
ok($st && defined $st->{active_slabs}, 'stat slabs: active_slabs');
$st = bin_stats($s, 'sizes');
ok(defined $st, 'stat sizes: answered and terminated');
$st = bin_stats($s, 'detail dump');
ok($st && exists $st->{detailed}, 'stat detail dump: one "detailed" value');
($r, $o) = call($OP{stat}, key => 'detail on');
reply_is($r, { opcode => $OP{stat}, status => 0, opaque => $o, keylen => 0, bodylen => 0 },
    'stat detail on: only the closing packet');
call($OP{set}, key => 'pfx:a', extras => ext_store(0, 0), value => '1');
call($OP{get}, key => 'pfx:a');
call($OP{getk}, key => 'pfx:b');
call($OP{gat}, key => 'pfx:a', extras => ext_exp(0));
call($OP{append}, key => 'pfx:a', value => '2');
call($OP{delete}, key => 'pfx:b');
$st = bin_stats($s, 'detail dump');
like($st && $st->{detailed}, qr/^PREFIX pfx get 3 hit 2 set 2 del 1\r\n/m,
    'stat detail dump: binary gets (gat too), sets (append too), deletes by prefix');
($r) = call($OP{stat}, key => 'detail off');
is($r && $r->{status}, 0, 'stat detail off');
for my $group ('bogus', 'conns', 'detail bogus') {
    ($r, $o) = call($OP{stat}, key => $group);
    reply_is($r, { opcode => $OP{stat}, status => $ST{key_enoent}, opaque => $o,
        value => 'Not found' }, "stat '$group': KEY_ENOENT, as memcached's binary engine");
}
($r, $o) = call($OP{stat}, key => 'reset');
reply_is($r, { opcode => $OP{stat}, status => 0, opaque => $o, keylen => 0, bodylen => 0 },
    'stat reset: only the closing packet');
$st = bin_stats($s);
is($st && $st->{cmd_get}, 0, 'stat reset: counters start again from zero');
$o = $next_opaque++;
mc_send($s, bin_req($OP{stat}, opaque => $o));
my $all_opaque = 1;
for (1 .. 10000) {
    my $p = bin_read($s) or do { $all_opaque = 0; last };
    $all_opaque = 0 if $p->{opaque} != $o || $p->{opcode} != $OP{stat};
    last if $p->{keylen} == 0;
}
ok($all_opaque, 'stat: every packet echoes the opcode and opaque');

# ---- flush -------------------------------------------------------------------------------------
($r, $o) = call($OP{flush});
reply_is($r, { opcode => $OP{flush}, status => 0, opaque => $o, bodylen => 0 },
    'flush: success');
($r) = call($OP{get}, key => 'k1');
is($r && $r->{status}, $ST{key_enoent}, 'flush removed the items');
call($OP{set}, key => 'f1', extras => ext_store(0, 0), value => 'x');
mc_send($s, bin_req($OP{flushq}));
noop_is_next('flushq: success is silent');
($r) = call($OP{get}, key => 'f1');
is($r && $r->{status}, $ST{key_enoent}, 'flushq removed the items');
call($OP{set}, key => 'f2', extras => ext_store(0, 0), value => 'x');
($r, $o) = call($OP{flush}, extras => ext_exp(3600));
reply_is($r, { opcode => $OP{flush}, status => 0, opaque => $o },
    'flush with a delay: success');
($r) = call($OP{get}, key => 'f2');
is($r && $r->{status}, 0, 'flush with a delay: items stay until then');

# ---- not served ------------------------------------------------------------------------------
{
    # memcached 1.6 answers VERBOSITY as unknown; it then discards bodylen
    # bytes counted after the extras, so 4 filler bytes keep it in step
    my $v = $srv->connect;
    mc_send($v, bin_req($OP{verbosity}, extras => ext_exp(1), opaque => 77) . "\0" x 4
          . bin_req($OP{noop}, opaque => 78));
    reply_is(bin_read($v), { opcode => $OP{verbosity}, status => $ST{unknown_command},
        opaque => 77, value => 'Unknown command' }, 'verbosity: UNKNOWN_COMMAND, as memcached 1.6');
    reply_is(bin_read($v), { opcode => $OP{noop}, status => 0, opaque => 78 },
        'verbosity: the body is discarded, the next request answered');
    close $v;
}
($r, $o) = call($OP{sasl_list_mechs});
reply_is($r, { opcode => $OP{sasl_list_mechs}, status => $ST{unknown_command}, opaque => $o },
    'sasl list mechs without SASL: UNKNOWN_COMMAND');
noop_is_next('the connection is still in step after it');

# ---- quit ----------------------------------------------------------------------------------
{
    my $q = $srv->connect;
    mc_send($q, bin_req($OP{quit}, opaque => 9) . bin_req($OP{noop}, opaque => 10));
    reply_is(bin_read($q), { opcode => $OP{quit}, status => 0, opaque => 9 },
        'quit: success reply');
    is(mc_bytes($q, 24, 3), '', 'quit: then the server closes, ignoring what followed');
    close $q;
    $q = $srv->connect;
    mc_send($q, bin_req($OP{quitq}, opaque => 9) . bin_req($OP{noop}, opaque => 10));
    is(mc_bytes($q, 24, 3), '', 'quitq: the server closes without a reply');
    close $q;
}

close $s;
$srv->stop;

# ---- flush disabled (-F) ----------------------------------------------------------------
$srv = start_server('-F');
$s   = $srv->connect;
call($OP{set}, key => 'kept', extras => ext_store(0, 0), value => 'x');
($r, $o) = call($OP{flush});
reply_is($r, { opcode => $OP{flush}, status => $ST{auth_error}, opaque => $o,
    value => 'Auth failure.' }, '-F: flush answers AUTH_ERROR');
($r, $o) = call($OP{flushq});
reply_is($r, { opcode => $OP{flushq}, status => $ST{auth_error}, opaque => $o },
    '-F: flushq answers the error too');
($r) = call($OP{get}, key => 'kept');
is($r && $r->{status}, 0, '-F: nothing was flushed');
my $fst = bin_stats($s);
is($fst && $fst->{cmd_flush}, 0, '-F: a refused binary flush is not counted');
close $s;
$srv->stop;
done_testing();
