#!/usr/bin/perl
# t/tools/tools.t: the libmemcached-tools programs (memccp, memccat, memcrm,
# memcstat: a real client library) against $MC_SERVER, in the text protocol
# and with --binary: files copied in read back byte for byte with their
# flags, add/replace semantics, removal, stats groups. What the tools store
# is checked with our raw binary client too.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";
use File::Temp qw(tempdir);
use Test::More;
use MCTest;
use MCBinary;

for my $tool (qw(memccp memccat memcrm memcstat)) {
    plan skip_all => "$tool (libmemcached-tools) is not installed"
      unless grep { -x "$_/$tool" } split /:/, $ENV{PATH};
}

# Runs a tool (at most 30 s, its complaints discarded); returns (exit
# code, stdout).
sub run {
    my @cmd = @_;
    open(my $saved_err, '>&', \*STDERR) or die "dup stderr: $!";
    open(STDERR, '>', '/dev/null') or die "stderr to /dev/null: $!";
    my $ok = open(my $fh, '-|', 'timeout', '30', @cmd);
    open(STDERR, '>&', $saved_err) or die "restore stderr: $!";
    die "cannot run @cmd: $!" unless $ok;
    binmode $fh;
    local $/;
    my $out = <$fh>;
    close $fh;
    return ($? >> 8, $out // '');
}

my $dir = tempdir('mctools-XXXXXX', TMPDIR => 1, CLEANUP => 1);
my %file = (
    'small.txt' => "hello, tools\n",
    'bytes.bin' => join('', map { chr } 0 .. 255) x 4,
    'large.dat' => join('', map { sprintf('%06d,', $_) } 1 .. 30_000),    # 210 KB
);
for my $name (keys %file) {
    open(my $fh, '>', "$dir/$name") or die;
    binmode $fh;
    print $fh $file{$name};
    close $fh;
}

my $srv = start_server();
my $servers = '--servers=127.0.0.1:' . $srv->port;
my $raw = $srv->connect;

for my $mode ('text', 'binary') {
    my @p = ($servers, $mode eq 'binary' ? ('--binary') : ());
    my $flags = $mode eq 'binary' ? 4242 : 17;

    my ($rc) = run('memccp', @p, "--flags=$flags", map { "$dir/$_" } sort keys %file);
    is($rc, 0, "$mode: memccp copies three files");
    for my $name (sort keys %file) {
        my ($crc, $out) = run('memccat', @p, $name);
        is($crc, 0, "$mode: memccat $name succeeds");
        # memccat ends each value with a newline of its own
        ok($out eq "$file{$name}\n", "$mode: memccat $name returns the file byte for byte");
        my $r = bin_call($raw, bin_req($OP{get}, key => $name));
        ok($r && $r->{value} eq $file{$name} && flags_of($r) == $flags,
            "$mode: $name as stored, with flags $flags, seen by a raw binary get");
    }
    my ($crc, $out) = run('memccat', @p, '--flags', 'small.txt');
    is($out, "$flags\n$file{'small.txt'}\n", "$mode: memccat --flags shows the flags");

    ($rc) = run('memccp', @p, '--add', "$dir/small.txt");
    isnt($rc, 0, "$mode: memccp --add of an existing key fails");
    ($rc) = run('memcrm', @p, 'small.txt');
    is($rc, 0, "$mode: memcrm removes a key");
    ($rc) = run('memccat', @p, 'small.txt');
    isnt($rc, 0, "$mode: memccat of a removed key fails");
    my $r = bin_call($raw, bin_req($OP{get}, key => 'small.txt'));
    is($r && $r->{status}, $ST{key_enoent}, "$mode: the key is gone for a raw client too");
    ($rc) = run('memcrm', @p, 'small.txt');
    isnt($rc, 0, "$mode: memcrm of a missing key fails");
    ($rc) = run('memccp', @p, '--replace', "$dir/small.txt");
    isnt($rc, 0, "$mode: memccp --replace of a missing key fails");
    ($rc) = run('memccp', @p, '--add', "$dir/small.txt");
    is($rc, 0, "$mode: memccp --add of a missing key succeeds");
    ($rc) = run('memccp', @p, '--replace', "$dir/small.txt");
    is($rc, 0, "$mode: memccp --replace of an existing key succeeds");

    ($rc, $out) = run('memcstat', @p);
    is($rc, 0, "$mode: memcstat succeeds");
    my $pid = $srv->pid;
    like($out, qr/^\s*pid: $pid$/m, "$mode: memcstat reports the server's pid");
    like($out, qr/^\s*curr_items: 3$/m, "$mode: memcstat reports curr_items 3");
    ($rc, $out) = run('memcstat', @p, 'settings');
    like($out, qr/^\s*item_size_max: \d+$/m, "$mode: memcstat settings");
    ($rc, $out) = run('memcstat', @p, 'items');
    like($out, qr/^\s*items:\d+:number: \d+$/m, "$mode: memcstat items");
    ($rc, $out) = run('memcstat', @p, 'slabs');
    like($out, qr/^\s*active_slabs: \d+$/m, "$mode: memcstat slabs");

    ($rc) = run('memcrm', @p, sort keys %file);
    is($rc, 0, "$mode: memcrm removes several keys");
    my $st = bin_stats($raw);
    is($st && $st->{curr_items}, 0, "$mode: nothing left");
}

close $raw;
$srv->stop;
done_testing();
