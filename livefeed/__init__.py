"""The live feed shared by the console, its monitor and the operations jobs: the channel
groups browsers subscribe to and the delta messages published to them (groups), and the
short history the monitor keeps in Redis (history), read by pages, the API and the lag
alert rules. The websocket consumer that serves it to browsers is console.live."""
