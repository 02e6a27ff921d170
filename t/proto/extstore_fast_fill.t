#!/usr/bin/perl
# extstore_fast_fill.t: a writer that fills RAM far faster than flash can
# take the values. 50,000 sets of 10 KiB, pipelined 100 at a time with no
# pause, into -m 64 with a 256 MB flash file: as with memcached's
# extstore, memory is made by evicting from COLD's tail, so no set is
# refused (no SERVER_ERROR); every key still present reads back byte-exact.
use strict;
use warnings;
use Test::More;
use File::Temp ();
use MCTest;

my $dir = File::Temp::tempdir(CLEANUP => 1);
my $file = "$dir/flash";
my $N = 50_000;
my $BATCH = 100;

sub value_of {
    my ($i) = @_;
    my $unit = sprintf('%07d|', $i);
    return substr($unit x 1281, 0, 10 * 1024);
}

my $srv = start_server('-m', '64', '-o', "ext_path=$file:256m");
my $s = $srv->connect;

my ($stored, $errors, $other, %first_error) = (0, 0, 0);
for (my $i = 0; $i < $N; $i += $BATCH) {
    my $req = '';
    for my $j ($i .. $i + $BATCH - 1) {
        my $v = value_of($j);
        $req .= "set k$j 0 0 " . length($v) . "\r\n$v\r\n";
    }
    mc_send($s, $req);
    for my $j ($i .. $i + $BATCH - 1) {
        my $line = mc_line($s, 30);
        if ($line eq "STORED\r\n") {
            $stored++;
        } elsif ($line =~ /^SERVER_ERROR/) {
            $errors++;
            $first_error{$line} //= $j;
        } else {
            $other++;
            die "lost sync at k$j: '$line'" if $line eq '';
        }
    }
}
is($errors, 0, "no set refused ($stored stored)")
  or diag(join('', map {"first at k$first_error{$_}: $_"} keys %first_error));
is($other, 0, 'no other reply than STORED');

my $st = mc_stats($s);
# outofmemory of the classes the values live in (a flash header that
# found no room when its value was moved only leaves the value in RAM; the
# small classes holding those headers are not the sets' business)
my $items = mc_stats($s, 'items');
my $slabs = mc_stats($s, 'slabs');
my $oom = 0;
for my $k (grep {/^items:(\d+):outofmemory$/} keys %$items) {
    my ($cls) = $k =~ /^items:(\d+):/;
    $oom += $items->{$k} if ($slabs->{"$cls:chunk_size"} // 0) >= 10 * 1024;
}
is($oom, 0, 'stats items: outofmemory is 0 in the classes of the values')
  or diag(join(' ', map {"$_=$items->{$_}"} grep {/:(outofmemory|evicted|number)$/} sort keys %$items));
cmp_ok($st->{evictions}, '>', 0, "RAM was short: items evicted ($st->{evictions})");
cmp_ok($st->{extstore_objects_written}, '>', 0,
    "values went to flash ($st->{extstore_objects_written})");

# every key still present reads back byte-exact
my ($hits, $wrong) = mc_read_back($s, $N, 50, \&value_of);
is($wrong, 0, "every value read back is byte-exact ($hits hit)");
cmp_ok($hits, '>', 6000, 'more keys are kept than RAM alone holds');
$srv->stop;
done_testing();
