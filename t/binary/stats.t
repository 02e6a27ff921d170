#!/usr/bin/perl
# t/binary/stats.t: the general counters (cmd_get, get_hits, cmd_touch,
# incr_misses, ...) after binary commands count as memcached's binary
# engine counts them, add up with text commands on the same server, and
# read the same through binary STAT and text "stats". Against $MC_SERVER
# (our server or Debian's memcached).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";
use Test::More;
use MCTest;
use MCBinary;

my $srv = start_server();
my $b   = $srv->connect;
my $t   = $srv->connect;
my $n   = 0;

sub bcall { my ($op, %a) = @_; return bin_call($b, bin_req($op, %a, opaque => ++$n)) }
sub quiet_then_noop {
    mc_send($b, $_[0] . bin_req($OP{noop}, opaque => 7777));
    for (1 .. 10) { my $r = bin_read($b) or last; last if $r->{opaque} == 7777 }
}

my @names = qw(cmd_get get_hits get_misses cmd_set cmd_touch touch_hits touch_misses
  cmd_flush delete_hits delete_misses incr_hits incr_misses decr_hits decr_misses
  cas_hits cas_badval cas_misses);
my $before = bin_stats($b);
sub delta {
    my $now = bin_stats($b);
    return { map { $_ => $now->{$_} - $before->{$_} } @names };
}
my %want = map { $_ => 0 } @names;

bcall($OP{set}, key => 'a', extras => ext_store(0, 0), value => 'v');
$want{cmd_set}++;
bcall($OP{get}, key => 'a');
bcall($OP{get}, key => 'b');
bcall($OP{getk}, key => 'a');
quiet_then_noop(bin_req($OP{getq}, key => 'b') . bin_req($OP{getkq}, key => 'a'));
@want{qw(cmd_get get_hits get_misses)} = (5, 3, 2);
is_deeply(delta(), \%want, 'get, getk, getq, getkq: cmd_get, get_hits, get_misses');

bcall($OP{gat}, key => 'a', extras => ext_exp(0));
bcall($OP{gatk}, key => 'b', extras => ext_exp(0));
bcall($OP{touch}, key => 'a', extras => ext_exp(0));
quiet_then_noop(bin_req($OP{gatq}, key => 'b', extras => ext_exp(0)));
@want{qw(cmd_touch touch_hits touch_misses)} = (4, 2, 2);
is_deeply(delta(), \%want, 'gat, gatk, touch, gatq: touch counters only, as memcached');

mc_send($t, "get a\r\n");
mc_until($t, "END\r\n");
mc_send($t, "get b\r\n");
mc_until($t, "END\r\n");
@want{qw(cmd_get get_hits get_misses)} = (7, 4, 3);
is_deeply(delta(), \%want, 'text gets add to the same counters');

bcall($OP{incr}, key => 'c', extras => ext_arith(1, 10, 0));    # created: not counted
bcall($OP{incr}, key => 'c', extras => ext_arith(1, 10, 0));
bcall($OP{decr}, key => 'c', extras => ext_arith(1, 10, 0));
quiet_then_noop(bin_req($OP{decrq}, key => 'c', extras => ext_arith(1, 10, 0)));
bcall($OP{incr}, key => 'd', extras => ext_arith(1, 10, 0xffffffff));
quiet_then_noop(bin_req($OP{incrq}, key => 'd', extras => ext_arith(1, 10, 0xffffffff)));
bcall($OP{decr}, key => 'd', extras => ext_arith(1, 10, 0xffffffff));
bcall($OP{incr}, key => 'a', extras => ext_arith(1, 10, 0));    # non-numeric: not counted
@want{qw(incr_hits incr_misses decr_hits decr_misses)} = (1, 2, 2, 1);
is_deeply(delta(), \%want, 'incr/decr: hits and misses; creating a counter counts neither');

bcall($OP{set}, key => 'e', extras => ext_store(0, 0), value => 'v');
bcall($OP{delete}, key => 'e', cas => 1);    # wrong cas: not counted
bcall($OP{delete}, key => 'e');
quiet_then_noop(bin_req($OP{deleteq}, key => 'e'));
bcall($OP{delete}, key => 'e');
$want{cmd_set}++;
@want{qw(delete_hits delete_misses)} = (1, 2);
is_deeply(delta(), \%want, 'delete: hits and misses; a cas conflict counts neither');

my $r = bcall($OP{set}, key => 'f', extras => ext_store(0, 0), value => 'v');
bcall($OP{set}, key => 'f', extras => ext_store(0, 0), value => 'w', cas => $r->{cas} + 100);
bcall($OP{set}, key => 'f', extras => ext_store(0, 0), value => 'w', cas => $r->{cas});
bcall($OP{set}, key => 'g', extras => ext_store(0, 0), value => 'w', cas => 5);
bcall($OP{append}, key => 'f', value => '+');
bcall($OP{append}, key => 'nokey', value => '+');
quiet_then_noop(bin_req($OP{setq}, key => 'h', extras => ext_store(0, 0), value => 'q'));
bcall($OP{set}, key => 'big', extras => ext_store(0, 0), value => 'x' x (1024 * 1024 + 1));
$want{cmd_set} += 7;    # every stored or tried value; the oversized one never arrived
@want{qw(cas_hits cas_badval cas_misses)} = (1, 1, 1);
is_deeply(delta(), \%want, 'set, cas, append: cmd_set and the cas counters');

bcall($OP{flush});
quiet_then_noop(bin_req($OP{flushq}));
$want{cmd_flush} = 2;
is_deeply(delta(), \%want, 'flush, flushq: cmd_flush');

my $bin_view  = bin_stats($b);
my $text_view = mc_stats($t);
is_deeply({ map { $_ => $text_view->{$_} } @names }, { map { $_ => $bin_view->{$_} } @names },
    'binary STAT and text "stats" report the same counters');

close $b;
close $t;
$srv->stop;
done_testing();
