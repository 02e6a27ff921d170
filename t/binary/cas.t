#!/usr/bin/perl
# t/binary/cas.t: compare-and-swap over the binary protocol: the cas a
# request carries turns set/add/replace into a CAS, guards append, prepend,
# delete and incr/decr; conflicts answer KEY_EEXISTS, missing keys
# KEY_ENOENT; every change yields a new cas. Also -C (no CAS): cas 0.
# Against $MC_SERVER (our server or Debian's memcached).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";
use Test::More;
use MCTest;
use MCBinary;

my $srv = start_server();
my $s   = $srv->connect;
my $n   = 100;

sub call { my ($op, %a) = @_; return bin_call($s, bin_req($op, %a, opaque => ++$n)) }
sub set_k { call($OP{set}, key => $_[0], extras => ext_store($_[2] // 0, 0), value => $_[1], cas => $_[3] // 0) }
sub status_is {
    my ($r, $status, $name) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    is($r ? sprintf('0x%02x', $r->{status}) : 'no reply', sprintf('0x%02x', $status), $name);
}
sub value_of { my $r = call($OP{get}, key => $_[0]); return $r && $r->{status} == 0 ? $r->{value} : undef }
sub cas_of   { my $r = call($OP{get}, key => $_[0]); return $r && $r->{status} == 0 ? $r->{cas} : undef }

my $r = set_k('c', 'one');
my $c1 = $r->{cas};
is(cas_of('c'), $c1, 'get returns the cas set answered');
$r = set_k('c', 'two');
my $c2 = $r->{cas};
isnt($c2, $c1, 'a new set gives a new cas');

# set with cas
$r = set_k('c', 'stale', 0, $c1);
status_is($r, $ST{key_eexists}, 'set with an old cas: KEY_EEXISTS');
is($r->{value}, 'Data exists for key.', 'set with an old cas: the text');
is($r->{cas}, 0, 'set with an old cas: the reply carries no cas');
is(value_of('c'), 'two', 'set with an old cas: the value is unchanged');
$r = set_k('c', 'three', 5, $c2);
status_is($r, 0, 'set with the current cas: success');
my $c3 = $r->{cas};
ok($c3 && $c3 != $c2, 'set with the current cas: a new cas');
is(value_of('c'), 'three', 'set with the current cas: stored');
$r = set_k('nocas', 'x', 0, 12345);
status_is($r, $ST{key_enoent}, 'set with a cas on a missing key: KEY_ENOENT');
is(value_of('nocas'), undef, 'set with a cas on a missing key: nothing stored');

# add and replace with a cas behave as a CAS
$r = call($OP{add}, key => 'c', extras => ext_store(0, 0), value => 'add', cas => $c3);
status_is($r, 0, 'add with the current cas on an existing key: stored, as a cas');
my $c4 = $r->{cas};
is(value_of('c'), 'add', 'add with a cas replaced the value');
$r = call($OP{add}, key => 'c2', extras => ext_store(0, 0), value => 'x', cas => 777);
status_is($r, $ST{key_enoent}, 'add with a cas on a missing key: KEY_ENOENT');
$r = call($OP{replace}, key => 'c', extras => ext_store(0, 0), value => 'rep', cas => $c3);
status_is($r, $ST{key_eexists}, 'replace with an old cas: KEY_EEXISTS');
$r = call($OP{replace}, key => 'c', extras => ext_store(0, 0), value => 'rep', cas => $c4);
status_is($r, 0, 'replace with the current cas: success');
my $c5 = $r->{cas};

# quiet CAS conflict answers, success is silent
mc_send($s, bin_req($OP{setq}, key => 'c', extras => ext_store(0, 0), value => 'q1', cas => $c4,
        opaque => 901)
      . bin_req($OP{setq}, key => 'c', extras => ext_store(0, 0), value => 'q2', cas => $c5,
        opaque => 902)
      . bin_req($OP{noop}, opaque => 903));
$r = bin_read($s);
ok($r && $r->{opaque} == 901 && $r->{status} == $ST{key_eexists},
    'setq with an old cas: KEY_EEXISTS answered');
$r = bin_read($s);
ok($r && $r->{opaque} == 903, 'setq with the current cas: silent');
is(value_of('c'), 'q2', 'setq with the current cas stored');
my $c6 = cas_of('c');

# append, prepend with a cas
$r = call($OP{append}, key => 'c', value => '+', cas => $c5);
status_is($r, $ST{key_eexists}, 'append with an old cas: KEY_EEXISTS');
$r = call($OP{append}, key => 'c', value => '+', cas => $c6);
status_is($r, 0, 'append with the current cas: success');
my $c7 = $r->{cas};
ok($c7 && $c7 != $c6, 'append: a new cas');
is(cas_of('c'), $c7, 'append: get returns the cas append answered');
$r = call($OP{prepend}, key => 'c', value => '-', cas => $c6);
status_is($r, $ST{key_eexists}, 'prepend with an old cas: KEY_EEXISTS');
$r = call($OP{prepend}, key => 'c', value => '-', cas => $c7);
status_is($r, 0, 'prepend with the current cas: success');
is(value_of('c'), '-q2+', 'append and prepend with cas joined the value');
$r = call($OP{append}, key => 'nokey', value => '+', cas => 99);
status_is($r, $ST{not_stored}, 'append with a cas on a missing key: NOT_STORED');

# delete with a cas
my $c8 = cas_of('c');
$r = call($OP{delete}, key => 'c', cas => $c7);
status_is($r, $ST{key_eexists}, 'delete with an old cas: KEY_EEXISTS');
ok(defined value_of('c'), 'delete with an old cas: the item stays');
$r = call($OP{delete}, key => 'c', cas => $c8);
status_is($r, 0, 'delete with the current cas: success');
is(value_of('c'), undef, 'delete with the current cas: gone');

# incr/decr with a cas
$r = call($OP{incr}, key => 'n', extras => ext_arith(1, 10, 0));
my $nc = $r->{cas};
$r = call($OP{incr}, key => 'n', extras => ext_arith(1, 0, 0), cas => $nc + 1000);
status_is($r, $ST{key_eexists}, 'incr with a wrong cas: KEY_EEXISTS');
$r = call($OP{incr}, key => 'n', extras => ext_arith(1, 0, 0), cas => $nc);
status_is($r, 0, 'incr with the current cas: success');
is(u64_of($r->{value}), 11, 'incr with the current cas: the new value');
ok($r->{cas} && $r->{cas} != $nc, 'incr: a new cas');
is(cas_of('n'), $r->{cas}, 'incr: get returns the cas incr answered');
$r = call($OP{decr}, key => 'n', extras => ext_arith(1, 0, 0), cas => $nc);
status_is($r, $ST{key_eexists}, 'decr with an old cas: KEY_EEXISTS');

# stats count CAS outcomes as memcached does
my $st = bin_stats($s);
is($st && $st->{cas_badval}, 3, 'cas_badval: set, replace, setq conflicts; not append/delete/incr');
is($st && $st->{cas_hits}, 4, 'cas_hits: set, add, replace, setq with a matching cas');
is($st && $st->{cas_misses}, 2, 'cas_misses counts set/add/replace with a cas on a missing key');

close $s;
$srv->stop;

# -C: no cas at all
$srv = start_server('-C');
$s = $srv->connect;
$r = set_k('x', 'v');
status_is($r, 0, '-C: set succeeds');
is($r->{cas}, 0, '-C: set answers cas 0');
$r = call($OP{get}, key => 'x');
is($r && $r->{cas}, 0, '-C: get answers cas 0');
close $s;
$srv->stop;
done_testing();
