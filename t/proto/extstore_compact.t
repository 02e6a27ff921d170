#!/usr/bin/perl
# extstore_compact.t: what happens to values after they reached flash
# (-o ext_path) in a temporary file. Compaction: most values of a full file
# are deleted, the fragmented pages are compacted (live values rewritten
# elsewhere, their pages freed) while a reader keeps reading, and every value
# left reads back byte-exact. Re-caching: with ext_recache_rate 1 a value
# read twice from flash goes back into RAM. A get that fails on a bad key
# after its flash reads were queued aborts them and the connection keeps
# serving. A read error (the file cut short under the server) gives misses
# and a counter, never wrong data (this server only: memcached 1.6.18's
# behaviour there is not a reference). Last, three clients set, delete and
# get their own keys for a few seconds while compaction and re-caching run
# all along: never a wrong value.
use strict;
use warnings;
use Test::More;
use File::Temp ();
use POSIX ();
use MCTest;

my $dir = File::Temp::tempdir(CLEANUP => 1);
my $file = "$dir/flash";

sub value_of {
    my ($i) = @_;
    my $unit = sprintf('%07d|', $i);
    return substr($unit x 1100, 0, 8000 + $i % 97);
}

sub wait_stat {
    my ($s, $name, $min, $secs) = @_;
    my $deadline = time + $secs;
    my $v = 0;
    while (time < $deadline) {
        $v = mc_stats($s)->{$name} // 0;
        return $v if $v >= $min;
        select(undef, undef, undef, 0.2);
    }
    return $v;
}

# "get" of one key: its value or undef; dies on a bad reply
sub get1 {
    my ($s, $key) = @_;
    mc_send($s, "get $key\r\n");
    my $line = mc_line($s, 10);
    return undef if $line eq "END\r\n";
    $line =~ /^VALUE \Q$key\E \d+ (\d+)\r\n\z/ or die "bad reply line: $line";
    my $data = mc_bytes($s, $1 + 2, 10);
    mc_line($s, 10) eq "END\r\n" or die 'no END';
    return substr($data, 0, $1);
}

# ---- compaction -------------------------------------------------------------
# 8 pages of 4 MiB; values of about 8 KB fill 6 of them, then two thirds of
# them are deleted: with one page free (ext_compact_under 2) the pages whose
# live bytes fell below ext_max_frag of a page are compacted.
my $N = 3000;
my $srv = start_server('-m', '16', '-o',
    "ext_page_size=4,ext_wbuf_size=2,ext_path=$file:32m,ext_item_age=0,"
      . 'ext_compact_under=2,ext_max_frag=0.9');
my $s = $srv->connect;
for my $i (0 .. $N - 1) {
    my $v = value_of($i);
    mc_send($s, "set k$i 0 0 " . length($v) . " noreply\r\n$v\r\n");
    if ($i % 100 == 99) {
        mc_send($s, "mn\r\n");
        mc_line($s) eq "MN\r\n" or die 'lost sync while filling';
        select(undef, undef, undef, 0.02);
    }
}
my $written = wait_stat($s, 'extstore_objects_written', $N - 200, 15);
cmp_ok($written, '>=', $N - 200, "values went to flash ($written)");
is(mc_stats($s)->{extstore_page_evictions}, 0, 'no page was dropped');
mc_send($s, "delete k$_ noreply\r\n") for grep { $_ % 3 } 0 .. $N - 1;
mc_is($s, "mn\r\n", "MN\r\n", 'two thirds deleted');

# read the survivors while compaction runs: never a wrong value
my ($reads, $wrong_during) = (0, 0);
my $deadline = time + 20;
my $st;
while (time < $deadline) {
    for (my $i = 0; $i < $N; $i += 3 * 17) {
        my $v = get1($s, "k$i");
        $reads++;
        $wrong_during++ if defined $v && $v ne value_of($i);
    }
    $st = mc_stats($s);
    last if $st->{extstore_compact_rescues} > 0 && $st->{extstore_page_reclaims} > 0;
    select(undef, undef, undef, 0.1);
}
cmp_ok($st->{extstore_compact_rescues}, '>', 0,
    "compaction rewrote live values ($st->{extstore_compact_rescues})");
cmp_ok($st->{extstore_page_reclaims}, '>', 0, 'and freed pages');
is($wrong_during, 0, "no wrong value in $reads reads during compaction");
select(undef, undef, undef, 1);
my ($hits, $wrong, $ghosts) = (0, 0, 0);
for my $i (0 .. $N - 1) {
    my $v = get1($s, "k$i");
    if ($i % 3) {
        $ghosts++ if defined $v;
        next;
    }
    next unless defined $v;
    $hits++;
    $wrong++ if $v ne value_of($i);
}
is($wrong, 0, 'after compaction: every value is byte-exact');
is($ghosts, 0, 'deleted keys stay deleted');
my $kept = int(($N + 2) / 3);
$st = mc_stats($s);
is($st->{badcrc_from_extstore}, 0, 'no checksum failures');
# memcached 1.6.18 loses values its compaction finds referenced (it counts
# them as extstore_compact_lost, here a quarter of them); this server
# rewrites every live value
if (target() eq 'memcached') {
    cmp_ok($hits, '>', $kept / 2, "after compaction: most kept keys hit ($hits of $kept)");
} else {
    is($hits, $kept, "after compaction: every kept key hits ($hits of $kept)");
    is($st->{extstore_compact_lost}, 0, 'no value lost');
}

# keys kept that still hit, for what follows
my @live;
for (my $i = 0; $i < $N && @live < 4; $i += 3) {
    push @live, $i if defined get1($s, "k$i");
}
cmp_ok(scalar @live, '>=', 4, 'kept keys to read');

# ---- re-caching -------------------------------------------------------------
mc_is($s, "extstore recache_rate 1\r\n", "OK\r\n", 'extstore recache_rate 1');
my $before = mc_stats($s);
my $k = $live[0];
# the second read marks it active (the LRU maintainer may take a moment)
my ($reads_ok, $after) = (0);
for my $n (1 .. 10) {
    $reads_ok++ if get1($s, "k$k") eq value_of($k);
    $after = mc_stats($s);
    last if $n >= 3 && $after->{recache_from_extstore} > $before->{recache_from_extstore};
    select(undef, undef, undef, 0.1);
}
ok($reads_ok >= 3, "k$k read back from flash ($reads_ok times)");
cmp_ok($after->{recache_from_extstore}, '>', $before->{recache_from_extstore},
    'a value read twice went back to RAM');
# memcached puts the value back in RAM a moment after the read that
# counted the re-cache: a read or two may still go to flash there
my ($from_ram, $flash_reads, $tries) = (0, 0, 0);
while (!$from_ram && $tries++ < 5) {
    my $flash0 = mc_stats($s)->{get_extstore};
    my $same = get1($s, "k$k") eq value_of($k);
    my $flash1 = mc_stats($s)->{get_extstore};
    $from_ram = $same && $flash1 == $flash0;
    $flash_reads += $flash1 - $flash0;
    select(undef, undef, undef, 0.1) unless $from_ram;
}
SKIP: {
    # memcached re-caches after the reply is sent, and its LRU maintainer
    # may write the re-cached value back to flash at once when this small
    # cache is under pressure: on a loaded host its next reads all went to
    # flash (5 of 5 once in a suite run). Ours must read from RAM.
    skip "memcached wrote the re-cached value back to flash ($flash_reads flash reads)", 2
        if target() eq 'memcached' && !$from_ram;
    ok($from_ram, "k$k read from RAM, without a flash read ($flash_reads flash reads before)");
    cmp_ok($flash_reads, '<=', target() eq 'ours' ? 0 : 2,
        'flash reads after the re-cache: none for ours, at most 2 for memcached');
}
mc_is($s, "extstore recache_rate 0\r\n", "OK\r\n", 'extstore recache_rate 0');

# ---- a get that fails after queuing flash reads -----------------------------
$before = mc_stats($s);
my $long = 'x' x 300;
my @three = @live[1 .. 3];
my $keys = join(' ', map {"k$_"} @three);
mc_is($s, "get $keys $long\r\n", "CLIENT_ERROR bad command line format\r\n",
    'a key too long after flash keys: the get fails');
cmp_ok(mc_stats($s)->{get_aborted_extstore}, '>', $before->{get_aborted_extstore},
    'get_aborted_extstore counts the reads it dropped');
ok(get1($s, "k$three[0]") eq value_of($three[0]), 'the connection keeps serving');

# ---- a read error -------------------------------------------------------------
SKIP: {
    skip 'a flash file cut short under the server: this server only', 4
      if target() eq 'memcached';
    truncate($file, 0) or die "truncate $file: $!";
    $before = mc_stats($s);
    my ($h2, $w2) = (0, 0);
    for (my $i = 0; $i < $N; $i += 3) {
        my $v = get1($s, "k$i");
        next unless defined $v;
        $h2++;
        $w2++ if $v ne value_of($i);
    }
    is($w2, 0, 'file cut short: no wrong data');
    $after = mc_stats($s);
    cmp_ok($after->{miss_from_extstore}, '>', $before->{miss_from_extstore},
        'file cut short: reads miss and miss_from_extstore counts them');
    mc_is($s, "set after 0 0 2\r\nok\r\n", "STORED\r\n", 'the server keeps serving');
    mc_is($s, "get after\r\n", "VALUE after 0 2\r\nok\r\nEND\r\n", 'and reads');
}
$srv->stop;

# ---- concurrent clients while compaction runs -------------------------------
# (14 pages of 2 MB: one is always kept free, as memcached's extstore does)
unlink $file;
$srv = start_server('-m', '16', '-o',
    "ext_page_size=2,ext_wbuf_size=2,ext_path=$file:28m,ext_item_age=0,ext_compact_under=4,"
      . 'ext_max_frag=0.9,ext_recache_rate=3');
sub churn_value {
    my ($k, $v) = @_;
    my $u = "$k:$v|";
    return substr($u x (6000 / length($u) + 2), 0, 3000 + (length($k) * 131 + $v) % 5000);
}
my @kids;
for my $c (0 .. 2) {
    my $pid = fork();
    die "fork: $!" unless defined $pid;
    if ($pid == 0) {    # a client of its own: set, delete, get its keys
        srand($c + $$);
        my $cs = $srv->connect;
        my (%ver, $wrong);
        my $end = time + 6;
        while (time < $end) {
            my $k = "c${c}_" . int(rand(1500));
            my $r = rand();
            if ($r < 0.35) {
                my $v = ($ver{$k} // 0) + 1;
                my $d = churn_value($k, $v);
                mc_send($cs, "set $k 0 0 " . length($d) . "\r\n$d\r\n");
                $ver{$k} = $v if mc_line($cs, 10) eq "STORED\r\n";
            } elsif ($r < 0.45) {
                mc_send($cs, "delete $k\r\n");
                mc_line($cs, 10);
                delete $ver{$k};
            } else {
                my $v = get1($cs, $k);
                $wrong++ if defined $v && !(defined $ver{$k} && $v eq churn_value($k, $ver{$k}));
            }
        }
        POSIX::_exit($wrong ? 1 : 0);
    }
    push @kids, $pid;
}
my $bad = 0;
for (@kids) {
    waitpid($_, 0);
    $bad++ if $?;
}
is($bad, 0, 'three clients setting, deleting and reading: never a wrong value');
$s = $srv->connect;
$st = mc_stats($s);
cmp_ok($st->{get_extstore}, '>', 0, "flash reads meanwhile ($st->{get_extstore})");
if (target() ne 'memcached') {    # memcached 1.6.18 misses some values compaction moved
    cmp_ok($st->{extstore_compact_rescues}, '>', 0, 'compaction ran meanwhile');
    is($st->{miss_from_extstore}, 0, 'no flash read missed');
}
$srv->stop;
done_testing();
