#!/usr/bin/perl
# t/binary/protocol_select.t: -B auto picks the protocol from each
# connection's first byte (0x80: binary), so text and binary clients share
# one server; -B binary serves only binary (text never gets an answer and
# closes the connection once a frame's worth arrived); -B ascii serves only
# text (binary frames are text lines there). Against $MC_SERVER (our server
# or Debian's memcached).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";
use Test::More;
use MCTest;
use MCBinary;

# ---- -B auto (the default), and explicitly --------------------------------------
for my $args ([], [ '-B', 'auto' ]) {
    my $label = @$args ? '-B auto' : 'default';
    my $srv = start_server(@$args);
    my $bin = $srv->connect;
    my $txt = $srv->connect;
    mc_send($txt, "set shared 5 0 4\r\ntext\r\n");
    is(mc_line($txt), "STORED\r\n", "$label: a text client stores");
    my $r = bin_call($bin, bin_req($OP{get}, key => 'shared', opaque => 3));
    ok($r && $r->{magic} == 0x81 && $r->{value} eq 'text' && flags_of($r) == 5,
        "$label: a binary client on another connection reads it");
    $r = bin_call($bin, bin_req($OP{set}, key => 'shared', extras => ext_store(6, 0),
        value => 'binary'));
    mc_send($txt, "get shared\r\n");
    is(mc_until($txt, "END\r\n"), "VALUE shared 6 6\r\nbinary\r\nEND\r\n",
        "$label: the text client reads what the binary one stored");

    # the choice holds for the life of the connection
    mc_send($txt, bin_req($OP{noop}, opaque => 1) . "\r\n");
    like(mc_line($txt), qr/^ERROR\r\n\z/, "$label: a binary frame on a text connection is a text line");
    ok(mc_resync($txt), "$label: the text connection carries on");
    mc_send($bin, "version\r\n" . ("\0" x 24));
    is(mc_bytes($bin, 1, 3), '', "$label: text on a binary connection closes it");
    close $bin;
    close $txt;
    $srv->stop;
}

# ---- -B binary ---------------------------------------------------------------------
{
    my $srv = start_server('-B', 'binary');
    my $s = $srv->connect;
    my $r = bin_call($s, bin_req($OP{version}, opaque => 4));
    ok($r && $r->{status} == 0 && $r->{opaque} == 4, '-B binary: binary is served');
    close $s;
    $s = $srv->connect;
    mc_send($s, "version\r\n");
    ok(mc_silent($s, 0.3), '-B binary: a short text request gets no answer');
    mc_send($s, "get a_key_long_enough_for_a_header\r\n");
    is(mc_bytes($s, 1, 3), '', '-B binary: once 24 text bytes arrived, the connection closes');
    close $s;
    $srv->stop;
}

# ---- -B ascii ------------------------------------------------------------------------
{
    my $srv = start_server('-B', 'ascii');
    my $s = $srv->connect;
    mc_send($s, "version\r\n");
    like(mc_line($s), qr/^VERSION \S+\r\n\z/, '-B ascii: text is served');
    close $s;
    $s = $srv->connect;
    # a NOOP frame's second byte is 0x0a, a newline: its first line is "\x80"
    mc_send($s, bin_req($OP{noop}, opaque => 1));
    is(mc_line($s), "ERROR\r\n", '-B ascii: a binary NOOP is answered as a text line');
    mc_send($s, "\r\n");
    is(mc_line($s), "ERROR\r\n", '-B ascii: the rest of the frame is a second line');
    ok(mc_resync($s), '-B ascii: the connection carries on as text');
    close $s;
    $srv->stop;
}

done_testing();
