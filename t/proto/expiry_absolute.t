#!/usr/bin/perl
# t/proto/expiry_absolute.t: an absolute exptime (a unix time, as clients
# compute it from their own clock: time() + 2) expires on its second, seen
# from the client's wall clock: present shortly before the deadline, gone
# shortly after it. Several rounds, each started at a different point within
# a wall-clock second, so a server clock whose second turns over out of step
# with the wall clock is caught.
use strict;
use warnings;
use Test::More;
use Time::HiRes qw(sleep time);
use MCTest;

my $srv = start_server();
my $s = $srv->connect;

# memcached's clock is refreshed by a once-a-second timer at an arbitrary
# phase, so there an item can outlive its absolute deadline by up to a second;
# and it converts absolute times with a start time read from the wall clock
# and a clock counting from a monotonic one, whose seconds turn over at
# another moment: a server started between the two turnovers expires
# absolute times a second early. memcached-rdma's clock turns over with the
# wall clock's second. "Early" is how long before the deadline the item must
# still be there (0.4 s: a loaded host may deliver the get a little late).
my $late = MCTest::target() eq 'ours' ? 0.25 : 1.25;
my $early = MCTest::target() eq 'ours' ? 0.4 : 1.4;

sub sleep_until { my $t = shift; my $d = $t - time; sleep $d if $d > 0 }

my $round = 0;
for my $phase (0.05, 0.35, 0.65, 0.9) {
    $round++;
    # start at $phase into a wall-clock second
    my $sec = int(time) + 1;
    sleep_until($sec + $phase);
    my $deadline = int(time) + 2;
    mc_is($s, "set abs$round 0 $deadline 1\r\nx\r\n", "STORED\r\n",
        "round $round (at .$phase s): set with exptime time()+2");
    sleep_until($deadline - $early);
    mc_is($s, "get abs$round\r\n", "VALUE abs$round 0 1\r\nx\r\nEND\r\n",
        "round $round: still there $early s before its deadline");
    sleep_until($deadline + $late);
    mc_is($s, "get abs$round\r\n", "END\r\n", "round $round: gone $late s after its deadline");
}

# touch and gat with an absolute time follow the same clock
my $deadline = int(time) + 2;
mc_is($s, "set touched 0 0 1\r\nt\r\n", "STORED\r\n", 'set an item that never expires');
mc_is($s, "touch touched $deadline\r\n", "TOUCHED\r\n", 'touch it with exptime time()+2');
sleep_until($deadline + $late);
mc_is($s, "get touched\r\n", "END\r\n", "gone $late s after the touched deadline");

$srv->stop;
done_testing();
